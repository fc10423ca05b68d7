//! A transferred agent answering messages: the conversation turn's hot path.
//!
//! - `agents/post_to_reply_http` (printed, p50 and p99 over 200 round trips): a human post over
//!   HTTP (`/mcp/conversations` `post_message`) until the agent's reply is committed, seen by
//!   polling `read_conversation` every 200 µs — the post's commit, the controller's wake-up,
//!   claim, dispatch fence, the `turn-prober` guest's warm turn (inbox read, reply, consume),
//!   the outcome and the exact consume, on the server's file database (`synchronous=FULL`).
//!   Target p50 ≤ 25 ms.
//! - `agents/drive_warm` (criterion): one dispatch opportunity in this process — claim, fence,
//!   the warm turn, outcome, consume — after a post made outside the timing: what the HTTP
//!   figure contains besides the transport and the post.
//! - `agents/drive_parked` (criterion): the same opportunity for a parked agent (its sandbox
//!   dropped before each post): the turn runs in a fresh sandbox instantiated from the compiled
//!   component. Target: ≤ 5 ms over `drive_warm`.
//! - `agents/turn_alone` (criterion): the guest's `turn` in its warm sandbox with nothing
//!   queued (the instance call and one inbox read), without any of the controller's commits.
//! - `agents/single_commit` (criterion): one `post_message` commit on the same disk — the price
//!   of each of the cycle's fsyncs right now (the baseline).
//! - `agents/thousand` (printed): 1,000 active agents (nano, `turn-prober`) each sent one
//!   message at once; time until all 1,000 replies are committed, and the host's RSS.
//!
//! The host's database is a `StorePool` on a file, as `ahp serve` opens it (connections sharing
//! one group commit). Run: `cargo bench -p ahp-host --bench agents` (`AHP_AGENTS_N` overrides
//! the 1,000).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use ahp_guests as guests;
use ahp_host::host::{Host, HostBuilder};
use ahp_host::interfaces::TurnCtx;
use ahp_host::sandbox::Call;
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT};
use ahp_host::store::{DEFAULT_POOL_CONNECTIONS, StorePool, Tier, TokenKey};
use ahp_host::testing;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

const SECRET: &str = "bench-secret-bench-secret-bench-secret";

fn message(cv: &str, body: &str, key: &str) -> NewMessage {
    NewMessage {
        conversation: cv.to_owned(),
        acting: Acting::Human,
        body: body.to_owned(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(key.to_owned()),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A stateless MCP tool call without a key; returns its structured result.
async fn call(client: &reqwest::Client, url: &str, tool: &str, arguments: Value) -> Value {
    common::mcp_call(client, url, None, tool, arguments).await
}

fn token(key: &TokenKey, t: &str, scope: ahp_host::store::TokenScope) -> String {
    let now = ahp_store::Clock::now(&ahp_store::SystemClock);
    ahp_host::store::issue_transfer_token(key, t, scope, now, ahp_host::store::DEFAULT_TOKEN_TTL).unwrap()
}

fn post_to_reply_http() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("AHP_TRANSFER_TOKEN_SECRET", SECRET)];
    common::served::ahp(
        dir.path(),
        &env,
        &["component", "add", guests::TURN_PROBER, "--name", "turn-prober"],
    );
    let (server, url) = common::served::serve(dir.path(), &env, &["--auth", "none"]);
    let conv = format!("{url}/conversations");
    let key = TokenKey::new(SECRET).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let samples = runtime.block_on(async {
        let c = reqwest::Client::new();
        let snap = serde_json::to_value(testing::snapshot(0, json!({}))).unwrap();
        let t = call(&c, &url, "snapshot_state", snap).await["transferId"]
            .as_str()
            .unwrap()
            .to_owned();
        let tok = token(&key, &t, ahp_host::store::TokenScope::ProvisionRuntime);
        call(
            &c,
            &url,
            "provision_runtime",
            json!({"transferId": t, "token": tok, "tier": "small",
            "budgetMicroUsd": 100_000_000, "component": "turn-prober"}),
        )
        .await;
        call(&c, &url, "push_state", json!({"transferId": t})).await;
        let tok = token(&key, &t, ahp_host::store::TokenScope::Activate);
        let agent = call(&c, &url, "activate", json!({"transferId": t, "token": tok})).await["agentId"]
            .as_str()
            .unwrap()
            .to_owned();
        let cv = call(
            &c,
            &conv,
            "create_conversation",
            json!({"title": "bench", "agentIds": [agent], "idempotencyKey": "cv"}),
        )
        .await["conversationId"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut samples = Vec::new();
        for i in 0..220 {
            let started = Instant::now();
            let posted = call(
                &c,
                &conv,
                "post_message",
                json!({"conversationId": cv, "body": format!("echo {i}"), "idempotencyKey": format!("p{i}")}),
            )
            .await;
            let seq = posted["seq"].as_u64().unwrap();
            loop {
                let r = call(
                    &c,
                    &conv,
                    "read_conversation",
                    json!({"conversationId": cv, "afterSeq": seq, "limit": 1}),
                )
                .await;
                if !r["messages"].as_array().unwrap().is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            if i >= 20 {
                samples.push(started.elapsed());
            }
        }
        samples
    });
    drop(server);
    let mut sorted = samples;
    sorted.sort();
    println!(
        "agents/post_to_reply_http: p50 {:?}  p99 {:?}  (n = {})",
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        sorted.len()
    );
}

/// An active `turn-prober` transfer at `tier` with `budget`, its agent, and the operator's
/// conversation `title` with it: `(transfer, agent, conversation)`.
fn conversing_agent(host: &Host, key: &TokenKey, tier: Tier, budget: u64, title: &str) -> (String, String, String) {
    let snap = testing::snapshot(0, json!({}));
    let t = testing::pushed(&mut host.store().locked(), key, &snap, tier, budget, "turn-prober").unwrap();
    let tok = testing::activate_token(&host.store().locked(), key, &t).unwrap();
    let agent = host.activate(&t, &tok).unwrap().transfer.agent_id.unwrap();
    let operator = Caller::full(OPERATOR_SUBJECT).unwrap();
    let new = NewConversation {
        title: title.into(),
        agents: vec![agent.clone()],
    };
    let cv = host
        .store()
        .locked()
        .create_conversation(&operator, &new, &format!("cv-{title}"))
        .unwrap()
        .value
        .id;
    (t, agent, cv)
}

/// The host's database as `ahp serve` opens it: a pool of connections sharing one group commit.
fn pool(dir: &Path, key: &TokenKey) -> StorePool {
    StorePool::open(dir.join("ahp.db"), DEFAULT_POOL_CONNECTIONS, |s| {
        Ok(s.with_token_key(key.clone()))
    })
    .unwrap()
}

fn in_process(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    let host = HostBuilder::new(pool(dir.path(), &key), dir.path())
        .policy(testing::policy())
        .build()
        .unwrap();
    host.sandboxes()
        .register_component_file(guests::TURN_PROBER, Some("turn-prober"))
        .unwrap();
    let operator = Caller::full(OPERATOR_SUBJECT).unwrap();
    let (t, agent, cv) = conversing_agent(&host, &key, Tier::Small, 1_000_000_000, "bench");
    let agents = host.agents().clone();
    let mut g = c.benchmark_group("agents");
    let mut i = 0_u64;
    // One opportunity after a post made outside the timing; `park` first drops the sandbox.
    let mut drive = |iters: u64, park: bool| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            i += 1;
            if park {
                let parked = host.sandboxes().park_idle(Instant::now() + Duration::from_secs(86_400));
                assert_eq!(parked.len(), 1);
            }
            host.store()
                .locked()
                .post_message(&operator, &message(&cv, &format!("echo {i}"), &format!("d{i}")))
                .unwrap();
            let started = Instant::now();
            let d = agents.drive(&agent).unwrap();
            total += started.elapsed();
            assert_eq!(d.consumed, 1);
        }
        total
    };
    g.bench_function("drive_warm", |b| b.iter_custom(|iters| drive(iters, false)));
    // The same opportunity for a parked agent: its sandbox dropped before each post, so the
    // turn instantiates a fresh one from the compiled component (no `resume`).
    g.bench_function("drive_parked", |b| b.iter_custom(|iters| drive(iters, true)));
    // The guest's `turn` with an empty inbox, for the last (consumed) wake: the instance call
    // and its one inbox read, without the controller's commits.
    let carrier = agents.carrier(&agent).unwrap();
    let wake = host
        .store()
        .locked()
        .list_wakes(&carrier.caller, &carrier.actor, 1)
        .unwrap()
        .pop()
        .unwrap();
    g.bench_function("turn_alone", |b| {
        b.iter(|| {
            let ctx = TurnCtx {
                caller: carrier.caller.clone(),
                actor: carrier.actor.clone(),
                wake: wake.clone(),
                queued: 0,
                replies: 0,
            };
            let r = host.agents().run_call(&t, Call::Turn(Box::new(ctx))).unwrap();
            assert_eq!(r.outcome, ahp_host::sandbox::RunOutcome::Returned);
        });
    });
    g.bench_function("single_commit", |b| {
        b.iter(|| {
            i += 1;
            host.store()
                .locked()
                .post_message(&operator, &message(&cv, "noop", &format!("c{i}")))
                .unwrap()
        });
    });
    g.finish();
}

fn thousand() {
    let n: usize = std::env::var("AHP_AGENTS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    let host = HostBuilder::new(pool(dir.path(), &key), dir.path())
        .policy(testing::policy())
        .engine(|e| {
            e.max_live_sandboxes = n as u32 + 16;
            e.max_memory_bytes = Tier::Nano.limits().memory_bytes;
            e.max_table_elements = Tier::Nano.limits().table_elements;
        })
        .build()
        .unwrap();
    host.sandboxes()
        .register_component_file(guests::TURN_PROBER, Some("turn-prober"))
        .unwrap();
    let rss_before = common::rss_kib("VmRSS:");
    let operator = Caller::full(OPERATOR_SUBJECT).unwrap();
    let conversations: Vec<String> = (0..n)
        .map(|i| conversing_agent(&host, &key, Tier::Nano, 1_000_000, &format!("a{i}")).2)
        .collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let agents = host.agents().clone();
    let workers = runtime.spawn(agents.clone().run_workers());
    let started = Instant::now();
    for (i, cv) in conversations.iter().enumerate() {
        ahp_host::ops::posting::post(
            &mut host.store().locked(),
            agents.as_ref(),
            &operator,
            &message(cv, "echo hello", &format!("m{i}")),
        )
        .unwrap();
    }
    let posted = started.elapsed();
    let replied = loop {
        let done = count_replies(dir.path());
        if done >= n as i64 {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{done}/{n} replied after 10 min"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    workers.abort();
    println!(
        "agents/thousand: {n} agents each answered one message in {replied:?} (posting took {posted:?}); \
         host RSS {} MiB → {} MiB, peak {} MiB",
        rss_before / 1024,
        common::rss_kib("VmRSS:") / 1024,
        common::rss_kib("VmHWM:") / 1024
    );
}

fn count_replies(dir: &Path) -> i64 {
    let db = rusqlite::Connection::open(dir.join("ahp.db")).unwrap();
    db.query_row("SELECT count(*) FROM messages WHERE author_kind = 'agent'", [], |r| {
        r.get(0)
    })
    .unwrap()
}

fn printed(_: &mut Criterion) {
    post_to_reply_http();
    thousand();
}

criterion_group!(benches, in_process, printed);
criterion_main!(benches);
