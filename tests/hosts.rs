//! Several `ahp serve` hosts on one PostgreSQL database, end to end (real processes, real
//! PostgreSQL from `AHP_TEST_PG`; skipped, saying so, without it): messages posted at either
//! host are answered by the right agent; a host killed with `kill -9` under load loses its
//! agents to the survivor within its lease and a margin, and an independent SQL check finds
//! every acknowledged message once, no sequence gap, one delivery per recipient, one attached
//! endpoint per agent and no live attempt below its endpoint's generation; a stopped
//! ("zombie") host is fenced when it runs again; an agent moved live under a stream of
//! messages answers each exactly once; a host cut off from the database mid-turn (the process
//! running on) stops the turn before the survivor claims its agent, and calls its model no more;
//! a second process under a host id whose lease holds is refused, unless it takes the id over;
//! an App card's acquire waiting at one host ends at a post made at the other.

use std::io::BufRead;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ahp_store::{TokenKey, TokenScope};
use serde_json::{Value, json};

use crate::mcp_http::{Server, serve_with_env};

/// The hosts' lease in these tests (the default is 15 s).
const LEASE: Duration = Duration::from_secs(3);
/// How long after a host's death its agents may take to answer again: the lease, the poll and
/// the survivor's bind and first turn (a sandbox set up from the cached component).
const TAKEOVER_MARGIN: Duration = Duration::from_secs(7);
const SECRET: &str = "hosts-e2e-shared-transfer-token-secret-0123456789";

/// One PostgreSQL database, a vault every host reads, and one data directory per host.
struct Cluster {
    database: String,
    _guard: ahp_store_postgres::testing::DatabaseGuard,
    vault: tempfile::TempDir,
    dirs: Vec<tempfile::TempDir>,
}

/// A running host and the lines of its log.
struct Host {
    server: Server,
    log: Arc<Mutex<Vec<String>>>,
}

impl Host {
    fn url(&self) -> String {
        self.server.url.clone()
    }

    fn logged(&self, needle: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(needle))
    }

    fn signal(&self, signal: &str) {
        let pid = self.server.child.id().to_string();
        let ok = Command::new("kill").args([signal, &pid]).status().unwrap().success();
        assert!(ok, "kill {signal} {pid}");
    }
}

fn cluster(hosts: usize) -> Option<Cluster> {
    let Some((database, guard)) = ahp_store_postgres::testing::fresh_database() else {
        eprintln!("AHP_TEST_PG not set: the several-hosts suite is skipped");
        return None;
    };
    let vault = tempfile::tempdir().unwrap();
    std::fs::write(vault.path().join("inventory-api"), "sk-e2e").unwrap();
    let dirs: Vec<_> = (0..hosts)
        .map(|_| {
            let d = tempfile::tempdir().unwrap();
            ahp_host::testing::policy().save(d.path()).unwrap();
            d
        })
        .collect();
    let c = Cluster {
        database,
        _guard: guard,
        vault,
        dirs,
    };
    // Registered once, on the first host's directory: the others load it from the database.
    c.ahp(
        0,
        &["component", "add", ahp_guests::TURN_PROBER, "--name", "turn-prober"],
    );
    Some(c)
}

impl Cluster {
    fn ahp(&self, host: usize, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
            .env("AHP_TRANSFER_TOKEN_SECRET", SECRET)
            .arg("--data-dir")
            .arg(self.dirs[host].path())
            .args(["--database", &self.database])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ahp {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn start(&self, host: usize, id: &str) -> Host {
        self.start_on(host, id, &self.database)
    }

    /// Starts host `host` as `id` reaching the database at `database` (e.g. through a proxy).
    fn start_on(&self, host: usize, id: &str, database: &str) -> Host {
        self.start_with(host, id, database, &[])
    }

    /// The arguments of `ahp serve` for a host `id` reaching the database at `database`.
    fn serve_args(&self, id: &str, database: &str) -> Vec<String> {
        let lease = format!("{}s", LEASE.as_secs());
        let vault = self.vault.path().to_str().unwrap().to_owned();
        [
            "--database",
            database,
            "--host-id",
            id,
            "--auth",
            "none",
            "--host-lease",
            &lease,
            "--poll-every",
            "200ms",
            "--vault-dir",
            &vault,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// [`start_on`](Self::start_on) with `extra` arguments for `ahp serve`.
    fn start_with(&self, host: usize, id: &str, database: &str, extra: &[&str]) -> Host {
        let mut args = self.serve_args(id, database);
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (server, stderr) = serve_with_env(
            self.dirs[host].path(),
            &args,
            "warn",
            &[("AHP_TRANSFER_TOKEN_SECRET", SECRET)],
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        let name = id.to_owned();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                // Shown when the test fails.
                println!("[{name}] {line}");
                lines.lock().unwrap().push(line);
            }
        });
        Host { server, log }
    }

    fn sql(&self) -> postgres::Client {
        postgres::Client::connect(&self.database, postgres::NoTls).unwrap()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn token(t: &str, scope: TokenScope) -> String {
    crate::common::token_with(&TokenKey::new(SECRET.as_bytes()).unwrap(), t, scope)
}

async fn call(url: &str, tool: &str, arguments: Value) -> Value {
    crate::common::call(url, None, tool, arguments).await
}

/// Activates a turn-prober agent at `url`; returns (transfer, agent).
async fn activate(url: &str) -> (String, String) {
    activate_component(url, "turn-prober").await
}

/// Activates an agent of `component` at `url`; returns (transfer, agent).
async fn activate_component(url: &str, component: &str) -> (String, String) {
    let snap = ahp_host::testing::snapshot(2, ahp_host::testing::inventory());
    let t = call(url, "snapshot_state", serde_json::to_value(&snap).unwrap()).await["transferId"]
        .as_str()
        .unwrap()
        .to_owned();
    let provision = json!({"transferId": t, "token": token(&t, TokenScope::ProvisionRuntime),
                           "tier": "small", "budgetMicroUsd": 5_000_000, "component": component});
    call(url, "provision_runtime", provision).await;
    call(url, "push_state", json!({"transferId": t})).await;
    let a = call(
        url,
        "activate",
        json!({"transferId": t, "token": token(&t, TokenScope::Activate)}),
    )
    .await;
    assert_eq!(a["status"], "active", "{a}");
    (t, a["agentId"].as_str().unwrap().to_owned())
}

async fn open(url: &str, agent: &str) -> String {
    let cv = call(
        &format!("{url}/conversations"),
        "create_conversation",
        json!({"title": "hosts", "agentIds": [agent], "idempotencyKey": format!("open-{agent}")}),
    )
    .await;
    cv["conversationId"].as_str().unwrap().to_owned()
}

async fn post(url: &str, cv: &str, body: &str) -> String {
    let key = body.replace(' ', "-");
    crate::common::post(&format!("{url}/conversations"), None, cv, body, &key).await
}

/// The replies to `question`, read straight from the database.
fn replies(db: &mut postgres::Client, question: &str) -> i64 {
    db.query_one("SELECT count(*) FROM messages WHERE reply_to = $1", &[&question])
        .unwrap()
        .get(0)
}

/// Waits until `question` has a reply; returns when it came.
fn answered(c: &Cluster, question: &str, within: Duration) -> Instant {
    let mut db = c.sql();
    let deadline = Instant::now() + within;
    loop {
        if replies(&mut db, question) > 0 {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{question} not answered within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn carrier(db: &mut postgres::Client, transfer: &str) -> Option<String> {
    db.query_one("SELECT host_id FROM transfers WHERE id = $1", &[&transfer])
        .unwrap()
        .get(0)
}

/// The independent check, in plain SQL: every acknowledged message exists exactly once; each
/// conversation's `seq` runs 1..n without a gap; one delivery per (message, recipient); at
/// most one attached endpoint per agent; no claimed or dispatched attempt below its agent's
/// current generation.
fn check_invariants(db: &mut postgres::Client, acknowledged: &[String]) {
    for id in acknowledged {
        let n: i64 = db
            .query_one("SELECT count(*) FROM messages WHERE id = $1", &[id])
            .unwrap()
            .get(0);
        assert_eq!(n, 1, "acknowledged message {id}");
    }
    let gaps = db
        .query(
            "SELECT conversation_id FROM messages GROUP BY conversation_id
             HAVING min(seq) <> 1 OR max(seq) <> count(*) OR count(DISTINCT seq) <> count(*)",
            &[],
        )
        .unwrap();
    assert!(gaps.is_empty(), "conversations with a seq gap: {}", gaps.len());
    let twice = db
        .query(
            "SELECT message_id FROM deliveries GROUP BY message_id, recipient_agent_id HAVING count(*) > 1",
            &[],
        )
        .unwrap();
    assert!(
        twice.is_empty(),
        "messages delivered twice to one recipient: {}",
        twice.len()
    );
    let attached = db
        .query(
            "SELECT agent_id FROM agent_endpoints WHERE state = 'attached' GROUP BY agent_id HAVING count(*) > 1",
            &[],
        )
        .unwrap();
    assert!(attached.is_empty(), "agents with two attached endpoints");
    let stale = db
        .query(
            "SELECT a.id FROM wake_attempts a JOIN agents g ON g.id = a.agent_id
             WHERE a.state IN ('claimed', 'dispatched') AND a.generation < g.controller_generation",
            &[],
        )
        .unwrap();
    assert!(
        stale.is_empty(),
        "live attempts below their agent's generation: {}",
        stale.len()
    );
}

/// No question in the database was answered twice. (A host that dies, or is stopped, after a
/// turn replied but before it consumed leaves that delivery queued: the next turn sees it
/// again, as after any crash past the dispatch fence. A live move has no such excuse.)
fn assert_answered_once(db: &mut postgres::Client) {
    let answered_twice = db
        .query(
            "SELECT reply_to FROM messages WHERE reply_to IS NOT NULL GROUP BY reply_to HAVING count(*) > 1",
            &[],
        )
        .unwrap();
    assert!(
        answered_twice.is_empty(),
        "questions answered twice: {}",
        answered_twice.len()
    );
}

#[test]
fn two_hosts_answer_for_each_other_and_a_killed_host_s_agents_answer_from_the_survivor() {
    let Some(c) = cluster(2) else { return };
    let rt = runtime();
    let (a, b) = (c.start(0, "host-a"), c.start(1, "host-b"));
    let (ta, xa) = rt.block_on(activate(&a.url()));
    let (tb, xb) = rt.block_on(activate(&b.url()));
    let mut db = c.sql();
    assert_eq!(carrier(&mut db, &ta).as_deref(), Some("host-a"));
    assert_eq!(carrier(&mut db, &tb).as_deref(), Some("host-b"));

    // Each host takes posts for the other's agent; the right agent answers.
    let cva = rt.block_on(open(&b.url(), &xa));
    let cvb = rt.block_on(open(&a.url(), &xb));
    let qa = rt.block_on(post(&b.url(), &cva, "to a, via b"));
    let qb = rt.block_on(post(&a.url(), &cvb, "to b, via a"));
    answered(&c, &qa, Duration::from_secs(20));
    answered(&c, &qb, Duration::from_secs(20));
    let author: String = db
        .query_one("SELECT author_agent_id FROM messages WHERE reply_to = $1", &[&qa])
        .unwrap()
        .get(0);
    assert_eq!(author, xa);
    // B vouches for A's agent: it is ready, though B does not run it.
    let listing = rt.block_on(call(
        &format!("{}/conversations", b.url()),
        "list_agent_identities",
        json!({}),
    ));
    let a_agent = listing["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["agentId"] == xa.as_str())
        .cloned();
    assert_eq!(a_agent.unwrap()["productionAutoResumeAvailable"], true, "{listing}");

    // A steady load on both agents (posted at B, every 20 ms), and kill -9 A under it.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (url, cvs, stop) = (b.url(), [cva.clone(), cvb.clone()], stop.clone());
        rt.spawn(async move {
            let mut sent = Vec::new();
            for i in 0.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                sent.push(post(&url, &cvs[i % 2], &format!("load {i}")).await);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            sent
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    let Host { mut server, .. } = a;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let mut acknowledged = vec![qa, qb];
    let mut after = Vec::new();
    for i in 0..5 {
        after.push(rt.block_on(post(&b.url(), &cva, &format!("after the kill {i}"))));
    }
    let first = answered(&c, &after[0], LEASE + TAKEOVER_MARGIN + Duration::from_secs(10));
    let recovery = first.duration_since(killed);
    eprintln!("host killed → its agent answered again from the survivor in {recovery:?}");
    assert!(recovery < LEASE + TAKEOVER_MARGIN, "took {recovery:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let loaded = rt.block_on(load).unwrap();
    assert!(loaded.len() > 20, "the load ran: {} posts", loaded.len());
    for q in after.iter().chain(&loaded) {
        answered(&c, q, Duration::from_secs(30));
    }
    acknowledged.extend(loaded);
    assert_eq!(carrier(&mut db, &ta).as_deref(), Some("host-b"));
    acknowledged.extend(after);
    check_invariants(&mut db, &acknowledged);
    drop(b);
}

#[test]
fn a_zombie_host_is_fenced_when_it_runs_again() {
    let Some(c) = cluster(2) else { return };
    let rt = runtime();
    let (a, b) = (c.start(0, "host-a"), c.start(1, "host-b"));
    let (ta, xa) = rt.block_on(activate(&a.url()));
    let cv = rt.block_on(open(&b.url(), &xa));
    let q = rt.block_on(post(&b.url(), &cv, "before the stop"));
    answered(&c, &q, Duration::from_secs(20));

    a.signal("-STOP");
    let mut db = c.sql();
    let deadline = Instant::now() + LEASE + TAKEOVER_MARGIN;
    while carrier(&mut db, &ta).as_deref() != Some("host-b") {
        assert!(Instant::now() < deadline, "B never claimed the stopped host's agent");
        std::thread::sleep(Duration::from_millis(50));
    }
    let during = rt.block_on(post(&b.url(), &cv, "while A is stopped"));
    answered(&c, &during, Duration::from_secs(20));

    a.signal("-CONT");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.logged("lost its lease") {
        assert!(
            Instant::now() < deadline,
            "A never noticed: {:?}",
            a.log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(a.logged("stopping every sandbox"), "{:?}", a.log.lock().unwrap());
    // A joins again as a new incarnation carrying nothing (its lease timer may notice after
    // its claim tick did); B still carries the agent, and every question was answered once.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = db
            .query_one("SELECT incarnation, state FROM hosts WHERE id = 'host-a'", &[])
            .unwrap();
        let (incarnation, state) = (row.get::<_, i64>(0), row.get::<_, String>(1));
        if (incarnation, state.as_str()) == (2, "live") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "A never joined again: incarnation {incarnation}, {state}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(carrier(&mut db, &ta).as_deref(), Some("host-b"));
    let last = rt.block_on(post(&a.url(), &cv, "after A came back"));
    answered(&c, &last, Duration::from_secs(20));
    check_invariants(&mut db, &[q, during, last]);
}

#[test]
fn a_second_process_under_a_live_host_id_is_refused_unless_it_takes_over() {
    let Some(c) = cluster(2) else { return };
    let rt = runtime();
    let a = c.start(0, "host-a");
    let (ta, xa) = rt.block_on(activate(&a.url()));
    // A second `ahp serve` under the same id, from another data directory.
    let refused = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .env("AHP_TRANSFER_TOKEN_SECRET", SECRET)
        .arg("--data-dir")
        .arg(c.dirs[1].path())
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(c.serve_args("host-a", &c.database))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    for needle in ["host host-a is in use", "serving at http://127.0.0.1:", "--take-over"] {
        assert!(stderr.contains(needle), "{needle:?} in {stderr}");
    }
    let mut db = c.sql();
    let row = db
        .query_one("SELECT incarnation, state FROM hosts WHERE id = 'host-a'", &[])
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, String>(1)), (1, "live".into()));

    // Taken over on purpose: the first process is fenced out, learns it, and does not take the
    // id back; the agent answers from the second.
    let twin = c.start_with(1, "host-a", &c.database, &["--take-over"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.logged("another process took this host id over") {
        assert!(
            Instant::now() < deadline,
            "A never noticed: {:?}",
            a.log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let row = db
        .query_one("SELECT incarnation, state FROM hosts WHERE id = 'host-a'", &[])
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, String>(1)), (2, "live".into()));
    assert_eq!(carrier(&mut db, &ta).as_deref(), Some("host-a"));
    let cv = rt.block_on(open(&twin.url(), &xa));
    let q = rt.block_on(post(&twin.url(), &cv, "after the take-over"));
    answered(&c, &q, Duration::from_secs(20));
    std::thread::sleep(LEASE);
    let row = db
        .query_one("SELECT incarnation FROM hosts WHERE id = 'host-a'", &[])
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 2, "no fencing loop");
    check_invariants(&mut db, &[q]);
    drop((a, twin));
}

#[test]
fn an_agent_moved_live_answers_every_message_once() {
    let Some(c) = cluster(2) else { return };
    let rt = runtime();
    let (a, b) = (c.start(0, "host-a"), c.start(1, "host-b"));
    let (ta, xa) = rt.block_on(activate(&a.url()));
    // B already runs an agent of the same component (compiled there): the pause is the move's.
    rt.block_on(activate(&b.url()));
    let cv = rt.block_on(open(&a.url(), &xa));
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(rt.block_on(post(&a.url(), &cv, &format!("before the move {i}"))));
    }
    let moved = c.ahp(0, &["agent", "move", &xa, "--to", "host-b"]);
    let moved: Value = serde_json::from_str(moved.trim()).unwrap();
    assert_eq!(moved["toHost"], "host-b", "{moved}");
    // A steady stream, at both hosts, while the agent moves.
    for i in 0..20 {
        let url = if i % 2 == 0 { a.url() } else { b.url() };
        sent.push(rt.block_on(post(&url, &cv, &format!("during the move {i}"))));
        std::thread::sleep(Duration::from_millis(25));
    }
    for q in &sent {
        answered(&c, q, Duration::from_secs(30));
    }
    let mut db = c.sql();
    assert_eq!(carrier(&mut db, &ta).as_deref(), Some("host-b"));
    // The pause: the gap between the last answer through A's endpoint and the first through
    // B's (messages arrived every ~25 ms meanwhile).
    let row = db
        .query_one(
            "SELECT (SELECT min(created_at) FROM messages WHERE author_agent_id = $1 AND author_generation = g.controller_generation)
                  - (SELECT max(created_at) FROM messages WHERE author_agent_id = $1 AND author_generation < g.controller_generation)
             FROM agents g WHERE g.id = $1",
            &[&xa],
        )
        .unwrap();
    let pause: i64 = row.get(0);
    eprintln!(
        "live move: last answer on the old host → first on the new: {} ms",
        pause / 1000
    );
    check_invariants(&mut db, &sent);
    assert_answered_once(&mut db);
    drop((a, b));
}

/// A TCP proxy in front of the database that the test can cut: every connection through it is
/// shut down and new ones are refused, while the host behind it runs on.
struct DatabaseProxy {
    url: String,
    cut: Arc<std::sync::atomic::AtomicBool>,
    open: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl DatabaseProxy {
    /// A proxy to the server of `database` (`postgres://user@host:port/db?…`); its `url`
    /// names the same database through the proxy.
    fn start(database: &str) -> Self {
        use std::net::{TcpListener, TcpStream};
        let rest = database.split_once("@").expect("a postgres URL with a user").1;
        let upstream = rest.split(['/', '?']).next().unwrap().to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = database.replacen(&upstream, &listener.local_addr().unwrap().to_string(), 1);
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (is_cut, streams) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            // Listening stops at the cut: a reconnect is refused.
            while !is_cut.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let mut open = streams.lock().unwrap();
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server.try_clone().unwrap(), client.try_clone().unwrap()),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
                open.extend([client, server]);
            }
        });
        Self { url, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Saves host `host`'s policy: the test policy, with the model `default` served by `provider`.
fn policy_with_model(c: &Cluster, host: usize, provider: &ahp_host::gateway::scripted::ScriptedProvider) {
    ahp_host::testing::policy_with_model(&provider.openai_endpoint(), "model-key")
        .save(c.dirs[host].path())
        .unwrap();
}

#[test]
fn a_host_cut_off_from_the_database_mid_turn_calls_nothing_after_the_survivor_claims() {
    use ahp_host::gateway::scripted::{Behaviour, ScriptedProvider};
    let Some(c) = cluster(2) else { return };
    std::fs::write(c.vault.path().join("model-key"), "sk-e2e-model").unwrap();
    // Each host has its own provider: what each was asked is what each host did. A's model
    // thinks for 10 s (within the small tier's 15 s wall clock); B's answers at once.
    let (_rt_a, model_a) = ScriptedProvider::start_on_own_runtime().unwrap();
    model_a.set_responder(Arc::new(|_| Behaviour::text("from a").after(Duration::from_secs(10))));
    let (_rt_b, model_b) = ScriptedProvider::start_on_own_runtime().unwrap();
    model_b.set_responder(Arc::new(|_| Behaviour::text("from b")));
    policy_with_model(&c, 0, &model_a);
    policy_with_model(&c, 1, &model_b);
    c.ahp(0, &["component", "add", ahp_guests::ASSISTANT, "--name", "assistant"]);

    let proxy = DatabaseProxy::start(&c.database);
    let rt = runtime();
    let (a, b) = (c.start_on(0, "host-a", &proxy.url), c.start(1, "host-b"));
    let (ta, xa) = rt.block_on(activate_component(&a.url(), "assistant"));
    let cv = rt.block_on(open(&b.url(), &xa));
    let first = rt.block_on(post(&b.url(), &cv, "first question"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while model_a.request_count() == 0 {
        assert!(Instant::now() < deadline, "A's turn never called its model");
        std::thread::sleep(Duration::from_millis(20));
    }

    // A's turn waits on its model; A loses the database, its process running on.
    proxy.cut();
    let cut = Instant::now();
    let mut db = c.sql();
    let deadline = cut + LEASE + TAKEOVER_MARGIN;
    while carrier(&mut db, &ta).as_deref() != Some("host-b") {
        assert!(Instant::now() < deadline, "B never claimed the cut-off host's agent");
        std::thread::sleep(Duration::from_millis(20));
    }
    let claimed = cut.elapsed();
    assert_eq!(
        model_a.in_flight(),
        0,
        "A dropped its model call before B claimed the agent, {claimed:?} after the cut (the model answers at 10 s)"
    );
    assert!(
        a.logged("turn cancelled"),
        "A cut its turn off when its lease stopped being fresh: {:?}",
        a.log.lock().unwrap()
    );
    let usage_at_claim: i64 = db
        .query_one("SELECT count(*) FROM usage_events WHERE transfer_id = $1", &[&ta])
        .unwrap()
        .get(0);

    // The agent answers from B: the question A's turn never finished, and a new one.
    let second = rt.block_on(post(&b.url(), &cv, "second question"));
    answered(&c, &second, Duration::from_secs(30));
    answered(&c, &first, Duration::from_secs(30));
    // Long enough for A's model to have answered and A to have gone on, had it kept going.
    std::thread::sleep(Duration::from_secs(11).saturating_sub(cut.elapsed()));
    assert_eq!(model_a.request_count(), 1, "A called its model again after the cut");
    assert!(
        model_b.request_count() >= 2,
        "B answered both: {}",
        model_b.request_count()
    );
    let authors: Vec<String> = db
        .query(
            "SELECT body FROM messages WHERE author_agent_id = $1 ORDER BY seq",
            &[&xa],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(authors.iter().all(|b| b == "from b"), "every reply is B's: {authors:?}");
    let usage_after: i64 = db
        .query_one("SELECT count(*) FROM usage_events WHERE transfer_id = $1", &[&ta])
        .unwrap()
        .get(0);
    eprintln!(
        "cut → claimed in {claimed:?}; usage events at the claim {usage_at_claim}, after B's answers {usage_after}"
    );
    assert_answered_once(&mut db);
    drop((a, b));
}

/// An `ask_agent` task across hosts: asked at one host, its agent's host frozen and then
/// killed (`kill -9`) before the reply; the survivor takes the agent over and its reply
/// completes the task — read at either host, the same, once. Then a second question asked
/// while the agent moves live to the other host: again one reply, one completion, readable
/// at both.
#[test]
fn an_ask_agent_task_survives_a_kill_and_a_live_move_and_ends_once() {
    let Some(c) = cluster(2) else { return };
    let rt = runtime();
    let (a, b) = (c.start(0, "host-a"), c.start(1, "host-b"));
    let (ta, xa) = rt.block_on(activate(&a.url()));
    rt.block_on(activate(&b.url()));
    let cv = rt.block_on(open(&a.url(), &xa));
    let ask = |url: &str, body: &str, key: &str| {
        let args = json!({"conversationId": cv, "body": body, "idempotencyKey": key});
        let r = rt.block_on(crate::common::call_declaring_tasks(
            &format!("{url}/conversations"),
            None,
            "ask_agent",
            args,
        ));
        assert_eq!(r["result"]["resultType"], "task", "{r}");
        r["result"]["taskId"].as_str().unwrap().to_owned()
    };
    let get = |url: &str, id: &str| {
        rt.block_on(crate::common::task_ended(
            &format!("{url}/conversations"),
            None,
            id,
            LEASE + TAKEOVER_MARGIN + Duration::from_secs(20),
        ))["result"]
            .clone()
    };

    // Host A (the agent's) stops answering, the question is asked at B, then A dies.
    a.signal("-STOP");
    let first = ask(&b.url(), "while its host is frozen", "q1");
    a.signal("-KILL");
    let at_b = get(&b.url(), &first);
    assert_eq!(at_b["status"], "completed", "{at_b}");
    assert_eq!(
        at_b["result"]["structuredContent"]["reply"]["body"],
        "echo: while its host is frozen"
    );
    let mut db = c.sql();
    assert_eq!(carrier(&mut db, &ta).as_deref(), Some("host-b"));
    drop(a);
    // A comes back (a new process, taking its id over): the same task, the same answer.
    let a = c.start_with(0, "host-a", &c.database, &["--take-over"]);
    assert_eq!(get(&a.url(), &first), at_b);

    // A question asked while the agent moves live from B to A.
    let second = ask(&b.url(), "during the move", "q2");
    let moved = c.ahp(1, &["agent", "move", &xa, "--to", "host-a"]);
    assert!(moved.contains("host-a"), "{moved}");
    let at_a = get(&a.url(), &second);
    assert_eq!(
        at_a["result"]["structuredContent"]["reply"]["body"],
        "echo: during the move"
    );
    assert_eq!(get(&b.url(), &second), at_a);

    // Each task ended exactly once; each question has one reply.
    let ends: Vec<i64> = db
        .query("SELECT ends FROM mcp_tasks ORDER BY created_at", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ends, [1, 1]);
    assert_answered_once(&mut db);
    drop((a, b));
}

/// An App card bound through one host waits there for its agent's wake (`waitSeconds`); a
/// message posted at the other host ends the wait by that host's wake signal, well before the
/// waiting acquire's own look (every 2 s).
#[test]
fn an_app_cards_waiting_acquire_ends_at_a_post_made_on_another_host() {
    let Some(c) = cluster(2) else { return };
    let (a, b) = (c.start(0, "host-a"), c.start(1, "host-b"));
    runtime().block_on(async {
        let at_a = format!("{}/conversations", a.url());
        let agent = call(
            &at_a,
            "create_agent_identity",
            json!({"handle": "carded", "displayName": "Carded", "description": "", "specialties": [],
                   "idempotencyKey": "carded"}),
        )
        .await["agentId"]
            .as_str()
            .unwrap()
            .to_owned();
        let ep = call(
            &at_a,
            "attach_agent_endpoint",
            json!({"agentId": agent, "leaseSeconds": 600, "idempotencyKey": "carded-ep"}),
        )
        .await;
        let view = json!({"agentId": agent, "endpointId": ep["endpointId"], "controllerGeneration": 1,
                          "bindingId": "ahp_host_binding_00112233445566778899aabbccddeeff"});
        call(&at_a, "agent_continuation_bind", view.clone()).await;
        let cv = open(&b.url(), &agent).await;
        let mut waiting = view.clone();
        waiting["waitSeconds"] = json!(25);
        let t0 = Instant::now();
        let (got, posted_at) = tokio::join!(call(&at_a, "agent_continuation_acquire", waiting), async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            post(&b.url(), &cv, "hello from host b").await;
            t0.elapsed()
        });
        let took = t0.elapsed();
        assert_eq!(got["kind"], "claimed", "{got}");
        assert!(
            took < posted_at + Duration::from_millis(1200),
            "claimed at host a {took:?} after the start; posted at host b at {posted_at:?}"
        );
    });
}
