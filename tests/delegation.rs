//! Agents delegate to agents, end to end against the real `ahp serve`: three transferred agents
//! of one owner — `examples/coordinator` and two `examples/worker`s — answer a human's question
//! over HTTP through two tasks and one wait; and a host killed (`kill -9`) mid-attempt, or right
//! after the last terminal fact, neither re-runs an attempt nor fires a wait twice (the attempt
//! whose outcome is unknown fails its task, which wakes the coordinator waiting on it).
//!
//! The delegation MCP tools are not on this branch yet: what the owner does while the host is
//! down (cancel a task) and what a worker's last commit would have been are made through the
//! store on the data directory, as the other crash tests post while the host is down.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ahp_store::conversation::AgentActor;
use ahp_store::delegation::{DELIVERY_UNKNOWN_RESULT, TaskCompletion, TaskOutcome, check_delegation_invariants};
use ahp_store::{Store, TokenScope};
use serde_json::{Value, json};

use crate::common::{call, token};
use crate::mcp_http::{Server, principal, serve};

/// SplitMix64 rounds of each worker's digest: about 10⁸ fuel, a few micro-USD at every tier,
/// so each worker's turn visibly costs its own budget.
const ROUNDS: u64 = 10_000_000;

const QUESTION: &str = "Which of our three warehouses should ship the A-1 order first?";

/// One transferred agent.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) transfer: String,
    pub(crate) agent: String,
}

/// Snapshot (with `tool_state`) → provision → push → activate `component` over `/mcp`.
pub(crate) async fn transfer(dir: &Path, url: &str, key: Option<&str>, component: &str, tool_state: Value) -> Member {
    let snap = json!({"sourceHost": "laptop", "systemPrompt": format!("You are a {component}."),
                      "messageHistory": [], "toolState": tool_state, "mcpConfig": []});
    let staged = call(url, key, "snapshot_state", snap).await;
    let t = staged["transferId"].as_str().unwrap().to_owned();
    let provision = json!({"transferId": t, "token": token(dir, &t, TokenScope::ProvisionRuntime),
                           "tier": "large", "budgetMicroUsd": 5_000_000, "component": component});
    call(url, key, "provision_runtime", provision).await;
    call(url, key, "push_state", json!({"transferId": t})).await;
    let activate = json!({"transferId": t, "token": token(dir, &t, TokenScope::Activate)});
    let a = call(url, key, "activate", activate).await;
    assert_eq!(a["status"], "active", "{a}");
    Member {
        transfer: t,
        agent: a["agentId"].as_str().unwrap().to_owned(),
    }
}

/// A coordinator, its two workers (`count` and `reverse`, the second taking `slow_ms` over its
/// task) and a conversation of the owner with the coordinator.
struct Team {
    dir: tempfile::TempDir,
    server: Server,
    key: Option<String>,
    coordinator: Member,
    workers: [Member; 2],
    cv: String,
}

impl Team {
    async fn new(wait_mode: &str, slow_ms: u64, keyed: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for (path, name) in [(ahp_guests::WORKER, "worker"), (ahp_guests::COORDINATOR, "coordinator")] {
            let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
                .arg("--data-dir")
                .arg(dir.path())
                .args(["component", "add", path, "--name", name])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        let key = keyed.then(|| {
            let scopes = [
                "transfer:read",
                "transfer:write",
                "communication:read",
                "communication:manage",
            ];
            principal(dir.path(), "orchestrator", &scopes)
        });
        let server = if keyed {
            serve(dir.path(), &[])
        } else {
            serve(dir.path(), &["--auth", "none"])
        };
        let (url, k) = (server.url.clone(), key.as_deref());
        let counter = transfer(dir.path(), &url, k, "worker", json!({"job": "count", "rounds": ROUNDS})).await;
        let reverser = transfer(
            dir.path(),
            &url,
            k,
            "worker",
            json!({"job": "reverse", "rounds": ROUNDS, "delayMs": slow_ms}),
        )
        .await;
        let coordinator = transfer(
            dir.path(),
            &url,
            k,
            "coordinator",
            json!({"workers": [counter.agent, reverser.agent], "waitMode": wait_mode}),
        )
        .await;
        let cv = call(
            &format!("{url}/conversations"),
            k,
            "create_conversation",
            json!({"title": "shipping", "agentIds": [coordinator.agent], "idempotencyKey": "open"}),
        )
        .await["conversationId"]
            .as_str()
            .unwrap()
            .to_owned();
        Self {
            dir,
            server,
            key,
            coordinator,
            workers: [counter, reverser],
            cv,
        }
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.dir.path().join("ahp.db")).unwrap()
    }

    fn count(&self, sql: &str) -> i64 {
        self.db().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// The task assigned to worker `i`, as (id, state, result); empty before it exists.
    fn task(&self, i: usize) -> (String, String, Option<String>) {
        use rusqlite::OptionalExtension as _;
        self.db()
            .query_row(
                "SELECT id, state, result FROM agent_tasks WHERE assignee_agent_id = ?1",
                [&self.workers[i].agent],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .unwrap()
            .unwrap_or_default()
    }

    /// The states of worker `i`'s task attempts, oldest first.
    fn attempt_states(&self, i: usize) -> Vec<String> {
        let db = self.db();
        let mut stmt = db
            .prepare("SELECT state FROM agent_task_attempts WHERE assignee_agent_id = ?1 ORDER BY number")
            .unwrap();
        stmt.query_map([&self.workers[i].agent], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// The states of the delivery attempts of worker `i`'s task-attempt wake.
    fn attempt_wake_deliveries(&self, i: usize) -> Vec<String> {
        let db = self.db();
        let mut stmt = db
            .prepare(
                "SELECT w.state FROM wake_attempts w JOIN agent_task_attempts a ON a.wake_id = w.wake_id
                 WHERE a.assignee_agent_id = ?1 ORDER BY w.claimed_at",
            )
            .unwrap();
        stmt.query_map([&self.workers[i].agent], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// How many wakes with origin `wait` exist, and how many causes of origin `wait`.
    fn wait_wakes(&self) -> (i64, i64) {
        (
            self.count("SELECT count(*) FROM wakes WHERE origin = 'wait'"),
            self.count("SELECT count(*) FROM wake_causes WHERE origin = 'wait'"),
        )
    }

    async fn post(&self, body: &str) -> String {
        let m = call(
            &format!("{}/conversations", self.server.url),
            self.key.as_deref(),
            "post_message",
            json!({"conversationId": self.cv, "body": body, "idempotencyKey": "question"}),
        )
        .await;
        m["messageId"].as_str().unwrap().to_owned()
    }

    async fn transcript(&self) -> Vec<Value> {
        let r = call(
            &format!("{}/conversations", self.server.url),
            self.key.as_deref(),
            "read_conversation",
            json!({"conversationId": self.cv, "limit": 200}),
        )
        .await;
        r["messages"].as_array().unwrap().clone()
    }

    /// Waits until the conversation holds `n` messages.
    async fn wait_for(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let t = self.transcript().await;
            if t.len() >= n {
                return t;
            }
            assert!(Instant::now() < deadline, "no answer within 60 s: {t:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn spent(&self, m: &Member) -> u64 {
        let s = call(
            &self.server.url,
            self.key.as_deref(),
            "get_status",
            json!({"transferId": m.transfer}),
        )
        .await;
        s["budget"]["spentMicroUsd"].as_u64().unwrap()
    }

    /// Kills the host with SIGKILL (no shutdown code runs) and starts another on the same data
    /// directory, after `while_down` ran against the store.
    fn restart(&mut self, while_down: impl FnOnce(&mut Store)) {
        self.server.child.kill().unwrap();
        self.server.child.wait().unwrap();
        let mut store = Store::open(self.dir.path().join("ahp.db")).unwrap();
        while_down(&mut store);
        drop(store);
        self.server = serve(self.dir.path(), &["--auth", "none"]);
    }

    /// Polls the database until `done` holds (at most 30 s).
    async fn until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(self) {
            assert!(Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn invariants_hold(&self) {
        let violations = check_delegation_invariants(self.dir.path().join("ahp.db")).unwrap();
        assert_eq!(violations, [], "the independent SQL check");
    }
}

/// What the worker with `job` hands in for `text`: its job's result and its digest (the
/// worker's own algorithm, redone here).
fn expected(job: &str, text: &str) -> String {
    let result = match job {
        "count" => {
            let words = text.split_whitespace().count();
            let letters = text.chars().filter(|c| c.is_alphabetic()).count();
            format!("count: {words} words, {letters} letters")
        }
        _ => format!(
            "reverse: {}",
            text.split_whitespace().rev().collect::<Vec<_>>().join(" ")
        ),
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    for _ in 0..ROUNDS {
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h = z ^ (z >> 31);
    }
    format!("{result}; digest {h:016x}")
}

/// The coordinator's line for worker `m`'s task.
fn line(m: &Member, state: &str, result: Option<&str>) -> String {
    match result {
        Some(r) => format!("\n- {} ({state}): {r}", m.agent),
        None => format!("\n- {} ({state})", m.agent),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_fans_out_to_two_workers_and_the_all_wait_answers_once() {
    let team = Team::new("all", 0, true).await;
    let before = [team.spent(&team.workers[0]).await, team.spent(&team.workers[1]).await];
    let question = team.post(QUESTION).await;
    let t = team.wait_for(2).await;

    // One answer, the coordinator's, to the question, with both results verbatim.
    let answer = &t[1];
    assert_eq!(answer["agentId"], team.coordinator.agent.as_str(), "{answer}");
    assert_eq!(answer["replyTo"], question.as_str());
    let body = answer["body"].as_str().unwrap();
    let (counted, reversed) = (expected("count", QUESTION), expected("reverse", QUESTION));
    assert_eq!(
        body,
        format!(
            "On \"{QUESTION}\":{}{}",
            line(&team.workers[0], "succeeded", Some(&counted)),
            line(&team.workers[1], "succeeded", Some(&reversed))
        )
    );
    // Two tasks, each done by its own worker in its own sandbox: the attempt's wake is that
    // worker's and was consumed, and the worker's own budget paid for the work.
    assert_eq!(team.task(0).1, "succeeded");
    assert_eq!(team.task(1).1, "succeeded");
    for (i, spent_before) in before.into_iter().enumerate() {
        assert_eq!(team.attempt_states(i), ["succeeded"]);
        let wake_agent: String = team
            .db()
            .query_row(
                "SELECT w.agent_id FROM wakes w JOIN agent_task_attempts a ON a.wake_id = w.id
                 WHERE a.assignee_agent_id = ?1 AND w.state = 'consumed'",
                [&team.workers[i].agent],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(wake_agent, team.workers[i].agent);
        let after = team.spent(&team.workers[i]).await;
        assert!(after > spent_before, "worker {i}'s spend {spent_before} → {after}");
    }
    // The all wait fired exactly once, and only one answer is ever posted.
    assert_eq!(team.wait_wakes(), (1, 1));
    assert_eq!(
        team.count("SELECT count(*) FROM agent_waits WHERE mode = 'all' AND state = 'triggered'"),
        1
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(team.transcript().await.len(), 2);
    team.invariants_hold();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_any_the_first_result_answers_and_the_slower_one_wakes_no_one() {
    let team = Team::new("any", 3_000, true).await;
    team.post(QUESTION).await;
    let t = team.wait_for(2).await;
    // The wait fired at the counter's result, while the reverser still worked.
    let counted = expected("count", QUESTION);
    assert_eq!(
        t[1]["body"].as_str().unwrap(),
        format!(
            "On \"{QUESTION}\":{}{}",
            line(&team.workers[0], "succeeded", Some(&counted)),
            line(&team.workers[1], "running", None)
        )
    );
    // The reverser finishes later: its terminal fact makes no second wake.
    team.until("the slow task succeeds", |t| t.task(1).1 == "succeeded")
        .await;
    assert_eq!(team.task(1).2.as_deref(), Some(expected("reverse", QUESTION).as_str()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(team.wait_wakes(), (1, 1));
    let fired_first = team.count(
        "SELECT count(*) FROM agent_waits w, agent_tasks t WHERE t.id IN
           (SELECT task_id FROM agent_wait_sources WHERE wait_id = w.id)
           AND t.state = 'succeeded' AND w.triggered_at < t.terminal_at",
    );
    assert_eq!(fired_first, 1, "the wait fired before the slower task ended");
    assert_eq!(team.transcript().await.len(), 2, "one answer");
    team.invariants_hold();
}

/// A team whose reverser blocks for a minute over its task, killed once the counter handed its
/// result in and the reverser's attempt is past its dispatch fence.
async fn killed_mid_attempt() -> Team {
    let team = Team::new("all", 60_000, false).await;
    team.post(QUESTION).await;
    team.until("the counter's result and the reverser's fence", |t| {
        t.task(0).1 == "succeeded" && t.attempt_wake_deliveries(1) == ["dispatched"]
    })
    .await;
    assert_eq!(team.attempt_states(1), ["active"]);
    team
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_mid_attempt_leaves_it_delivery_unknown_never_rerun_and_the_coordinator_woken() {
    let mut team = killed_mid_attempt().await;
    team.restart(|_| {});
    // Past the fence the old process may have run it: never again, and the task says so by
    // failing, which ends the wait's last source: it fires once, and the coordinator answers
    // once, with what is known.
    assert_eq!(team.attempt_states(1), ["delivery_unknown"]);
    assert_eq!(team.attempt_wake_deliveries(1), ["delivery_unknown"]);
    let (_, state, result) = team.task(1);
    assert_eq!(
        (state.as_str(), result.as_deref()),
        ("failed", Some(DELIVERY_UNKNOWN_RESULT))
    );
    let t = team.wait_for(2).await;
    let counted = expected("count", QUESTION);
    assert_eq!(
        t[1]["body"].as_str().unwrap(),
        format!(
            "On \"{QUESTION}\":{}{}",
            line(&team.workers[0], "succeeded", Some(&counted)),
            line(&team.workers[1], "failed", Some(DELIVERY_UNKNOWN_RESULT))
        )
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(team.attempt_states(1), ["delivery_unknown"], "no new attempt");
    assert_eq!(team.attempt_wake_deliveries(1), ["delivery_unknown"], "not re-run");
    assert_eq!(team.transcript().await.len(), 2);
    assert_eq!(team.wait_wakes(), (1, 1));
    team.invariants_hold();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_after_the_last_terminal_fact_runs_the_wait_wake_once() {
    let mut team = killed_mid_attempt().await;
    // The state a kill right after the reverser's hand-in committed leaves: its result is in,
    // the wait fired, and the coordinator's wake has not run.
    let (owner, reverser) = (team.workers[1].transfer.clone(), team.workers[1].agent.clone());
    let reversed = expected("reverse", QUESTION);
    let handed_in = reversed.clone();
    let attempt: String = team
        .db()
        .query_row(
            "SELECT id FROM agent_task_attempts WHERE assignee_agent_id = ?1",
            [&reverser],
            |r| r.get(0),
        )
        .unwrap();
    team.restart(move |store| {
        let caller = store.transfer(&owner).unwrap().owner().unwrap().host_caller().unwrap();
        let listing = store.list_agent_listings(&caller, None, 10).unwrap();
        let endpoint = listing
            .iter()
            .find(|l| l.agent.id == reverser)
            .and_then(|l| l.current_endpoint.clone())
            .expect("the dead host's endpoint of the reverser");
        let actor = AgentActor::of(&endpoint);
        let done = TaskCompletion {
            attempt,
            outcome: TaskOutcome::Succeeded,
            result: handed_in,
        };
        store.complete_task_attempt(&caller, &actor, &done).unwrap();
    });
    let t = team.wait_for(2).await;
    let counted = expected("count", QUESTION);
    assert_eq!(
        t[1]["body"].as_str().unwrap(),
        format!(
            "On \"{QUESTION}\":{}{}",
            line(&team.workers[0], "succeeded", Some(&counted)),
            line(&team.workers[1], "succeeded", Some(&reversed))
        )
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(team.transcript().await.len(), 2, "answered once");
    assert_eq!(team.wait_wakes(), (1, 1), "exactly one Wait-origin wake");
    assert_eq!(
        team.count("SELECT count(*) FROM wakes WHERE origin = 'wait' AND state = 'consumed'"),
        1
    );
    team.invariants_hold();
}
