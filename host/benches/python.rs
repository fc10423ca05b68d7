//! What a Python sandbox costs beside a Rust one, in one run (method and figures:
//! BENCHMARKS.md, "Python guests").
//!
//! Two pairs of twins: the assistants (`examples/assistant`, `examples/python-assistant`) for
//! size and compile, and two echo agents for the turn — the Rust `turn-prober` (reads its
//! inbox, replies `echo: <body>`, consumes) and the Python template (`templates/python`, which
//! with no model offered reads its inbox, replies, consumes, and loads and saves its
//! checkpoint).
//!
//! - printed: component size; cold compile (`Component::new` on the host's engine) and a
//!   compile-cache hit (a host restarted on the same data directory registering the same
//!   bytes: the compiled file is loaded, not compiled), median of 3; RSS per live sandbox
//!   (`AHP_PYTHON_LIVE`, default 50, of each kept live after its activation).
//! - criterion `python_vs_rust/warm_instantiate/*`: instantiate from the cached `InstancePre`
//!   in a pooled slot and call `resume` (`trial_resume`), the Python template vs the Rust
//!   `turn-prober` (both return at once from `resume`);
//! - criterion `python_vs_rust/warm_turn/*`: post a message and `drive` the agent (its live
//!   sandbox): the turn, its reply and the controller's commits.
//!
//! `cargo bench -p ahp-host --bench python`

use std::time::{Duration, Instant};

use ahp_guests as guests;
use ahp_host::host::HostBuilder;
use ahp_host::sandbox::RunOutcome;
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT};
use ahp_host::store::{Store, Tier, TokenKey};
use ahp_host::testing;
use criterion::{Criterion, criterion_group};
use serde_json::json;

mod common;

/// `(label, component name, path)` of the echo twins.
const ECHO: [(&str, &str, &str); 2] = [
    ("rust", "turn-prober", guests::TURN_PROBER),
    ("python", "template-python", guests::TEMPLATE_PYTHON),
];

/// The benches' host (`common::host`: every Rust guest registered) with the Python echo twin
/// registered too.
fn host(configure: impl FnOnce(&mut ahp_host::sandbox::engine::EngineConfig)) -> common::Bench {
    let b = common::host(configure);
    let (_, name, path) = ECHO[1];
    b.sandboxes.register_component_file(path, Some(name)).unwrap();
    b
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Size, cold compile, compile-cache hit and RSS per live sandbox, printed.
fn printed(_: &mut Criterion) {
    for (label, path) in [
        ("rust assistant", guests::ASSISTANT),
        ("python assistant", guests::PYTHON_ASSISTANT),
    ] {
        let bytes = std::fs::read(path).unwrap();
        let b = common::host(|_| {});
        let engine = b.sandboxes.engine().clone();
        let cold = median(
            (0..3)
                .map(|_| {
                    let t0 = Instant::now();
                    wasmtime::component::Component::new(&engine, &bytes).unwrap();
                    t0.elapsed()
                })
                .collect(),
        );
        // The compile cache: register once (compiles and writes the compiled file), then a
        // host restarted on the same data directory registers the same bytes.
        let dir = tempfile::tempdir().unwrap();
        let host = |db| HostBuilder::new(db, dir.path().join("data")).build().unwrap();
        host(Store::open_in_memory().unwrap())
            .sandboxes()
            .register_component(&bytes, Some("a"))
            .unwrap();
        let hit = median(
            (0..3)
                .map(|_| {
                    let h = host(Store::open_in_memory().unwrap());
                    let t0 = Instant::now();
                    h.sandboxes().register_component(&bytes, Some("a")).unwrap();
                    let took = t0.elapsed();
                    assert_eq!(h.sandboxes().compiles(), 0, "a cache hit");
                    took
                })
                .collect(),
        );
        println!(
            "{label:17} size {:>6.2} MiB   cold compile {:>9.1} ms   compile-cache hit {:>7.1} ms",
            bytes.len() as f64 / (1024.0 * 1024.0),
            cold.as_secs_f64() * 1e3,
            hit.as_secs_f64() * 1e3
        );
    }
    for (label, _, path) in ECHO {
        let bytes = std::fs::read(path).unwrap();
        let b = common::host(|_| {});
        let component = wasmtime::component::Component::new(b.sandboxes.engine(), &bytes).unwrap();
        let counts = ahp_host::sandbox::ComponentCounts::of(&component, &bytes).unwrap();
        println!(
            "{label:7} echo agent: {} core instances, {} memories, {} tables per sandbox (the pool holds {} core instances per slot)",
            counts.instances,
            counts.memories,
            counts.tables,
            ahp_host::sandbox::engine::CORE_INSTANCES_PER_SANDBOX
        );
    }
    let n: u32 = std::env::var("AHP_PYTHON_LIVE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    for (label, name, _) in ECHO {
        // A Python sandbox takes more of the pool's core instances than a slot's share (see the
        // counts above): twice the slots leave room for `n` of them.
        let b = host(|c| c.max_live_sandboxes = 2 * (n + 16));
        let snap = testing::snapshot(2, json!({}));
        b.active(&snap, name, false);
        let before = rss_kib();
        let started = Instant::now();
        for _ in 0..n {
            b.active(&snap, name, true);
        }
        let took = started.elapsed();
        assert_eq!(b.sandboxes.live_count(), n as usize);
        println!(
            "{label:7} echo agent: {n} live sandboxes, RSS {:.2} MiB per live sandbox, activation {:.2} ms each",
            (rss_kib().saturating_sub(before)) as f64 / 1024.0 / f64::from(n),
            took.as_secs_f64() * 1e3 / f64::from(n)
        );
    }
}

fn warm_instantiate(c: &mut Criterion) {
    let b = host(|_| {});
    let mut g = c.benchmark_group("python_vs_rust/warm_instantiate");
    for (label, name, _) in ECHO {
        let t = b.active(&testing::snapshot(2, json!({})), name, false);
        g.bench_function(label, |bench| {
            bench.iter(|| assert_eq!(b.sandboxes.trial_resume(&t).unwrap().0, RunOutcome::Returned));
        });
    }
    g.finish();
}

fn warm_turn(c: &mut Criterion) {
    let key = TokenKey::random();
    let dir = tempfile::tempdir().unwrap();
    let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    let host = HostBuilder::new(db, dir.path().join("data")).build().unwrap();
    let operator = Caller::full(OPERATOR_SUBJECT).unwrap();
    let mut g = c.benchmark_group("python_vs_rust/warm_turn");
    let mut i = 0_u64;
    for (label, name, path) in ECHO {
        host.sandboxes().register_component_file(path, Some(name)).unwrap();
        let snap = testing::snapshot(2, json!({}));
        let t = testing::pushed(
            &mut host.store().locked(),
            &key,
            &snap,
            Tier::Small,
            1_000_000_000,
            name,
        )
        .unwrap();
        let tok = testing::activate_token(&host.store().locked(), &key, &t).unwrap();
        let agent = host.activate(&t, &tok).unwrap().transfer.agent_id.unwrap();
        let new = NewConversation {
            title: label.into(),
            agents: vec![agent.clone()],
        };
        let cv = host
            .store()
            .locked()
            .create_conversation(&operator, &new, &format!("cv-{label}"))
            .unwrap()
            .value
            .id;
        g.bench_function(label, |bench| {
            bench.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    i += 1;
                    let message = NewMessage {
                        conversation: cv.clone(),
                        acting: Acting::Human,
                        body: format!("hello {i}"),
                        reply_to: None,
                        idempotency: IdempotencyKey::Key(format!("m{i}")),
                    };
                    host.store().locked().post_message(&operator, &message).unwrap();
                    let started = Instant::now();
                    let d = host.agents().drive(&agent).unwrap();
                    total += started.elapsed();
                    assert_eq!(d.consumed, 1);
                }
                total
            });
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = printed, warm_instantiate, warm_turn
}
/// `criterion_main!`, after checking that there are Python guests to measure.
fn main() {
    if guests::python_guests("the Python benchmarks").is_err() {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
