//! A transferred agent keeps running, end to end against the real `ahp serve`: the owner talks
//! to it over HTTP and it answers from its sandbox, paid from its budget; and a host killed
//! (`kill -9`) around a turn neither loses a message nor answers one twice.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ahp_store::TokenScope;
use serde_json::{Value, json};

use crate::common::{call, post, token};
use crate::mcp_http::{Server, principal, serve, stateless};

/// A data directory with `component` registered, the operator's policy and the vault
/// credential the forecaster needs.
pub(crate) fn data_dir(component: &str, name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ahp_host::testing::policy().save(dir.path()).unwrap();
    std::fs::create_dir_all(dir.path().join("vault")).unwrap();
    std::fs::write(dir.path().join("vault/inventory-api"), "sk-e2e").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["component", "add", component, "--name", name])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// Snapshot → provision → push → activate over `/mcp`; returns (transfer, agentId).
async fn activate(dir: &Path, url: &str, key: Option<&str>, component: &str, tier: &str) -> (String, String) {
    let snap = ahp_host::testing::snapshot(2, ahp_host::testing::inventory());
    let staged = call(url, key, "snapshot_state", serde_json::to_value(&snap).unwrap()).await;
    let t = staged["transferId"].as_str().unwrap().to_owned();
    let provision = json!({"transferId": t, "token": token(dir, &t, TokenScope::ProvisionRuntime),
                           "tier": tier, "budgetMicroUsd": 5_000_000, "component": component});
    call(url, key, "provision_runtime", provision).await;
    call(url, key, "push_state", json!({"transferId": t})).await;
    let a = call(
        url,
        key,
        "activate",
        json!({"transferId": t, "token": token(dir, &t, TokenScope::Activate)}),
    )
    .await;
    assert_eq!(a["status"], "active", "{a}");
    let agent = a["agentId"]
        .as_str()
        .unwrap_or_else(|| panic!("no agentId: {a}"))
        .to_owned();
    (t, agent)
}

fn conversations(url: &str) -> String {
    format!("{url}/conversations")
}

/// Opens a conversation with `agent`; returns its id.
async fn open(url: &str, key: Option<&str>, agent: &str) -> String {
    let cv = call(
        &conversations(url),
        key,
        "create_conversation",
        json!({"title": "forecast questions", "agentIds": [agent], "idempotencyKey": format!("open-{agent}")}),
    )
    .await;
    cv["conversationId"].as_str().unwrap().to_owned()
}

async fn transcript(url: &str, key: Option<&str>, cv: &str) -> Vec<Value> {
    let r = call(
        &conversations(url),
        key,
        "read_conversation",
        json!({"conversationId": cv, "limit": 200}),
    )
    .await;
    r["messages"].as_array().unwrap().clone()
}

/// Waits until `cv` holds at least `n` messages.
async fn wait_for(url: &str, key: Option<&str>, cv: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = transcript(url, key, cv).await;
        if t.len() >= n {
            return t;
        }
        assert!(Instant::now() < deadline, "no reply within 60 s: {t:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn spent(url: &str, key: Option<&str>, t: &str) -> u64 {
    let s = call(url, key, "get_status", json!({"transferId": t})).await;
    s["budget"]["spentMicroUsd"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_talks_to_the_transferred_agent_over_http() {
    let dir = data_dir(ahp_guests::FORECASTER, "forecaster");
    let scopes = [
        "transfer:read",
        "transfer:write",
        "communication:read",
        "communication:manage",
    ];
    let owner = principal(dir.path(), "orchestrator", &scopes);
    let other = principal(dir.path(), "someone-else", &scopes);
    let server = serve(dir.path(), &[]);
    let (url, key) = (server.url.clone(), Some(owner.as_str()));
    let (t, agent) = activate(dir.path(), &url, key, "forecaster", "small").await;
    let status = call(&url, key, "get_status", json!({"transferId": t})).await;
    assert_eq!(status["transfer"]["agentId"], agent.as_str());

    // The agent belongs to the transfer's owner, and its readiness says this host runs it.
    let listing = call(&conversations(&url), key, "list_agent_identities", json!({})).await;
    let mine = &listing["agents"][0];
    assert_eq!(mine["agentId"], agent.as_str(), "{listing}");
    assert_eq!(mine["productionAutoResumeAvailable"], true, "{listing}");
    let theirs = call(&conversations(&url), Some(&other), "list_agent_identities", json!({})).await;
    assert_eq!(theirs["agents"], json!([]), "another key does not see it");

    let cv = open(&url, key, &agent).await;
    let before = spent(&url, key, &t).await;
    let question = post(&conversations(&url), key, &cv, "How much A-1 should I reorder?", "q1").await;
    let t2 = wait_for(&url, key, &cv, 2).await;
    let reply = &t2[1];
    assert_eq!(reply["authorKind"], "agent", "{reply}");
    assert_eq!(reply["agentId"], agent.as_str());
    assert_eq!(reply["replyTo"], question.as_str());
    assert!(reply["body"].as_str().unwrap().contains("A-1"), "{reply}");
    // The turn ran on the transfer's budget: its compute is metered in whole micro-USD as it
    // accrues (a turn this small may fit in the micro-USD activation already paid; the turn
    // tests in host/tests/sandbox/ charge larger ones), never refunded.
    let after = spent(&url, key, &t).await;
    assert!(after >= before && after >= 1, "spend {before} → {after}");
    drop(server);
}

/// The wakes of `agent` and their states, read straight from the database.
fn wake_states(dir: &Path, agent: &str) -> Vec<String> {
    let db = rusqlite::Connection::open(dir.join("ahp.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT state FROM wakes WHERE agent_id = ?1 ORDER BY created_at")
        .unwrap();
    stmt.query_map([agent], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Kills `server` with SIGKILL (no shutdown code runs).
fn kill(mut server: Server) {
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_after_the_dispatch_fence_never_answers_twice() {
    let dir = data_dir(ahp_guests::TURN_PROBER, "turn-prober");
    let server = serve(dir.path(), &["--auth", "none"]);
    let url = server.url.clone();
    let (_, agent) = activate(dir.path(), &url, None, "turn-prober", "small").await;
    let cv = open(&url, None, &agent).await;
    post(&conversations(&url), None, &cv, "reply-then-sleep 10000", "slow").await;
    // The reply is posted after the fence; the guest then sleeps: kill the host mid-turn.
    let t = wait_for(&url, None, &cv, 2).await;
    assert_eq!(t[1]["body"], "replied");
    kill(server);
    assert_eq!(wake_states(dir.path(), &agent), ["dispatched"]);
    assert_eq!(attempt_states(dir.path(), &agent), ["dispatched"]);

    let server = serve(dir.path(), &["--auth", "none"]);
    // Past the fence the old process may have run the turn: never again.
    assert_eq!(attempt_states(dir.path(), &agent), ["delivery_unknown"]);
    assert_eq!(wake_states(dir.path(), &agent), ["dispatched"]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t = transcript(&server.url, None, &cv).await;
    assert_eq!(t.len(), 2, "no second reply: {t:?}");
    // The agent is carried again, under a new generation, and answers new messages.
    post(&conversations(&server.url), None, &cv, "echo after", "after").await;
    let t = wait_for(&server.url, None, &cv, 3).await;
    assert!(t.len() >= 3, "{t:?}");
}

/// The review's recipe (M4), on a real `ahp serve`: a turn with several deliveries answers the
/// first, the host is killed (`kill -9`) while it works on the next, and after the restart the
/// next message's turn answers what was left — every message has exactly one reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_mid_turn_never_answers_a_message_of_that_turn_twice() {
    let dir = data_dir(ahp_guests::TURN_PROBER, "turn-prober");
    let server = serve(dir.path(), &["--auth", "none"]);
    let url = server.url.clone();
    let (_, agent) = activate(dir.path(), &url, None, "turn-prober", "small").await;
    let cv = open(&url, None, &agent).await;
    // The first turn answers #1 slowly; #2 and #3, posted meanwhile, wait for the next turn,
    // which answers #2 and is killed while it works on #3.
    let mut asked = vec![post(&conversations(&url), None, &cv, "slowly 1500 #1", "q1").await];
    asked.push(post(&conversations(&url), None, &cv, "slowly 1500 #2", "q2").await);
    asked.push(post(&conversations(&url), None, &cv, "slowly 1500 #3", "q3").await);
    let answered = |t: &[Value], q: &str| t.iter().filter(|m| m["replyTo"] == q).count();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = transcript(&url, None, &cv).await;
        if answered(&t, &asked[1]) == 1 {
            assert_eq!(answered(&t, &asked[2]), 0, "killed before #3's answer: {t:?}");
            break;
        }
        assert!(Instant::now() < deadline, "#2 never answered: {t:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill(server);

    let server = serve(dir.path(), &["--auth", "none"]);
    asked.push(post(&conversations(&server.url), None, &cv, "slowly 10 #4", "q4").await);
    let t = wait_for(&server.url, None, &cv, 8).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t2 = transcript(&server.url, None, &cv).await;
    assert_eq!(t2.len(), t.len(), "nothing more was answered: {t2:?}");
    for q in &asked {
        assert_eq!(answered(&t2, q), 1, "{q}: {t2:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_a_crash_left_before_the_fence_runs_once_after_restart() {
    use ahp_store::conversation::{AgentActor, bounds::MAX_CLAIM_LEASE};
    let dir = data_dir(ahp_guests::TURN_PROBER, "turn-prober");
    let server = serve(dir.path(), &["--auth", "none"]);
    let url = server.url.clone();
    let (t, agent) = activate(dir.path(), &url, None, "turn-prober", "small").await;
    let cv = open(&url, None, &agent).await;
    kill(server);
    // While the host is down a message arrives (the CLI is the operator), and the state a
    // crash between claim and fence leaves is made: the wake claimed through the dead
    // process's carrier, never dispatched.
    let mut store = ahp_store::Store::open(dir.path().join("ahp.db")).unwrap();
    let caller = store.transfer(&t).unwrap().owner().unwrap().host_caller().unwrap();
    let new = ahp_store::conversation::NewMessage {
        conversation: cv.clone(),
        acting: ahp_store::conversation::Acting::Human,
        body: "echo while down".into(),
        reply_to: None,
        idempotency: ahp_store::conversation::IdempotencyKey::Key("down".into()),
    };
    store.post_message(&caller, &new).unwrap();
    let listing = store.list_agent_listings(&caller, None, 10).unwrap();
    let endpoint = listing[0].current_endpoint.clone().expect("the dead host's endpoint");
    let actor = AgentActor::of(&endpoint);
    let claim = store.claim_wake(&caller, &actor, MAX_CLAIM_LEASE).unwrap();
    assert!(claim.is_some());
    assert_eq!(wake_states(dir.path(), &agent), ["claimed"]);
    drop(store);

    let server = serve(dir.path(), &["--auth", "none"]);
    let t2 = wait_for(&server.url, None, &cv, 2).await;
    assert_eq!(t2[1]["body"], "echo: echo while down");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(transcript(&server.url, None, &cv).await.len(), 2, "the turn ran once");
    assert_eq!(wake_states(dir.path(), &agent), ["consumed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_a_burst_of_posts_loses_and_duplicates_nothing() {
    let dir = data_dir(ahp_guests::TURN_PROBER, "turn-prober");
    let server = serve(dir.path(), &["--auth", "none"]);
    let url = server.url.clone();
    let (_, agent) = activate(dir.path(), &url, None, "turn-prober", "small").await;
    let cv = open(&url, None, &agent).await;
    // 100 posts from 4 clients; the host is killed while they run (some posts fail with it).
    let mut posting = Vec::new();
    for c in 0..4 {
        let (url, cv) = (url.clone(), cv.clone());
        posting.push(tokio::spawn(async move {
            for i in 0..25 {
                let params = json!({"name": "post_message", "arguments": {
                    "conversationId": cv, "body": format!("echo {c}-{i}"), "idempotencyKey": format!("burst-{c}-{i}")}});
                let _ = stateless(&conversations(&url), None, "tools/call", Some("post_message"), params).await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    // Kill once some, not all, of the burst is in (and turns are running).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let db = rusqlite::Connection::open(dir.path().join("ahp.db")).unwrap();
        let posted: i64 = db
            .query_row("SELECT count(*) FROM messages WHERE author_kind = 'human'", [], |r| {
                r.get(0)
            })
            .unwrap();
        if posted >= 30 {
            assert!(posted < 100, "the whole burst got in before the kill");
            break;
        }
        assert!(Instant::now() < deadline, "the burst never started");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    kill(server);
    for p in posting {
        let _ = p.await;
    }
    // Restart, and post what did not get through (idempotency keys make a retry exact).
    let server = serve(dir.path(), &["--auth", "none"]);
    for c in 0..4 {
        for i in 0..25 {
            post(
                &conversations(&server.url),
                None,
                &cv,
                &format!("echo {c}-{i}"),
                &format!("burst-{c}-{i}"),
            )
            .await;
        }
    }
    // Every message is answered: 100 posts, 100 replies.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let db = rusqlite::Connection::open(dir.path().join("ahp.db")).unwrap();
        let queued: i64 = db
            .query_row(
                "SELECT count(*) FROM deliveries WHERE recipient_agent_id = ?1 AND state = 'queued'",
                [&agent],
                |r| r.get(0),
            )
            .unwrap();
        if queued == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{queued} deliveries still queued");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(server);
    // The independent check, over the database.
    let db = rusqlite::Connection::open(dir.path().join("ahp.db")).unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    let human = count("SELECT count(*) FROM messages WHERE author_kind = 'human'");
    assert_eq!(human, 100, "every post exactly once");
    let deliveries_per_message = count(
        "SELECT count(*) FROM messages m WHERE m.author_kind = 'human' AND
           (SELECT count(*) FROM deliveries d WHERE d.message_id = m.id) <> 1",
    );
    assert_eq!(deliveries_per_message, 0, "exactly one delivery per agent recipient");
    // Each reply was posted under exactly one reply identity (wake id + operation index, whose
    // record is unique by its primary key).
    let unidentified = count(
        "SELECT count(*) FROM messages m WHERE m.author_kind = 'agent' AND
           (SELECT count(*) FROM communication_idempotency i WHERE i.resource_id = m.id) <> 1",
    );
    assert_eq!(unidentified, 0, "no reply identity twice");
    let answered = count("SELECT count(DISTINCT reply_to) FROM messages WHERE author_kind = 'agent'");
    assert_eq!(answered, 100, "every message answered");
}

/// The delivery attempts of `agent`'s wakes and their states, oldest first.
fn attempt_states(dir: &Path, agent: &str) -> Vec<String> {
    let db = rusqlite::Connection::open(dir.join("ahp.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT state FROM wake_attempts WHERE agent_id = ?1 ORDER BY claimed_at")
        .unwrap();
    stmt.query_map([agent], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}
