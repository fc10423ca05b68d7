//! Store throughput on a real file with `synchronous=FULL` (every commit fsyncs the WAL).
//!
//! - `raw_sqlite_insert`: the baseline — one single-row `INSERT` per immediate transaction,
//!   plain rusqlite, same pragmas. The ceiling set by the disk's fsync rate.
//! - `transition`: one `report_usage` on an `active` transfer (read, compare-and-set, budget
//!   update, audit event, one commit).
//! - `lifecycle`: snapshot → provision → push → begin/complete activation → report: six commits.
//! - `token_issue_verify_consume`: mint a `provision_runtime` token and spend it on a staged
//!   transfer (the provision transition included, as that is where a token is consumed).
//!
//! - `store_in_memory/*`: the same on an in-memory database — the CPU cost without the disk.
//!
//! Run: `cargo bench -p ahp-store --bench transfers`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ahp_store::*;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rusqlite::{Connection, TransactionBehavior};
use serde_json::json;

fn snapshot() -> SnapshotInput {
    SnapshotInput {
        source_host: "laptop-7".into(),
        system_prompt: "You forecast inventory for a small retailer.".into(),
        message_history: (0..8)
            .map(|i| Message {
                role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
                content: format!("message {i}"),
            })
            .collect(),
        tool_state: json!({ "inventory": { "SKU-1": 40, "SKU-2": 12 }, "horizonDays": 7 }),
        mcp_config: vec![McpServer {
            server: "https://inventory.example.com/mcp".into(),
            cred_ref: "inventory-api".into(),
        }],
    }
}

fn open(dir: &tempfile::TempDir, key: &TokenKey) -> Store {
    Store::open(dir.path().join("bench.db"))
        .unwrap()
        .with_token_key(key.clone())
}

fn token(store: &Store, key: &TokenKey, t: &str, scope: TokenScope) -> String {
    issue_transfer_token(key, t, scope, store.now(), DEFAULT_TOKEN_TTL).unwrap()
}

fn active_transfer(store: &mut Store, key: &TokenKey, budget: u64) -> String {
    let t = store.snapshot_state(&snapshot()).unwrap().id;
    let tok = token(store, key, &t, TokenScope::ProvisionRuntime);
    store
        .provision_runtime(&t, Tier::Small, budget, "forecaster", &tok)
        .unwrap();
    store.push_state(&t, None).unwrap();
    let tok = token(store, key, &t, TokenScope::Activate);
    store.begin_activation(&t, &tok).unwrap();
    store.complete_activation(&t).unwrap();
    t
}

/// The baseline: one single-row insert in its own immediate transaction, plain rusqlite.
fn raw_insert(raw: &mut Connection) {
    let tx = raw.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    tx.execute("INSERT INTO t (v) VALUES ('usage_reported')", []).unwrap();
    tx.commit().unwrap();
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("store");
    g.throughput(Throughput::Elements(1))
        .measurement_time(Duration::from_secs(6))
        .sample_size(30);

    let dir = tempfile::tempdir().unwrap();
    let mut raw = Connection::open(dir.path().join("raw.db")).unwrap();
    raw.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
        .unwrap();
    raw.pragma_update(None, "synchronous", "FULL").unwrap();
    raw.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    g.bench_function("raw_sqlite_insert", |b| b.iter(|| raw_insert(&mut raw)));

    let key = TokenKey::random();
    let mut store = open(&dir, &key);
    let t = active_transfer(&mut store, &key, MAX_BUDGET_MICRO_USD);
    g.bench_function("transition", |b| {
        b.iter(|| black_box(store.report_usage(&t, 1, "compute").unwrap()))
    });

    g.bench_function("lifecycle", |b| {
        b.iter(|| black_box(active_transfer(&mut store, &key, 1_000)))
    });

    g.bench_function("token_issue_verify_consume", |b| {
        b.iter_custom(|iters| {
            let staged: Vec<_> = (0..iters)
                .map(|_| store.snapshot_state(&snapshot()).unwrap().id)
                .collect();
            let start = Instant::now();
            for t in staged {
                let tok = token(&store, &key, &t, TokenScope::ProvisionRuntime);
                black_box(
                    store
                        .provision_runtime(&t, Tier::Nano, 1_000, "forecaster", &tok)
                        .unwrap(),
                );
            }
            start.elapsed()
        })
    });
    g.finish();
}

/// The same operations with no disk at all: what a transition costs in CPU, i.e. the rate a
/// disk with free fsyncs would reach.
fn in_memory(c: &mut Criterion) {
    let mut g = c.benchmark_group("store_in_memory");
    g.throughput(Throughput::Elements(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(30);
    let mut raw = Connection::open_in_memory().unwrap();
    raw.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    g.bench_function("raw_sqlite_insert", |b| b.iter(|| raw_insert(&mut raw)));
    let key = TokenKey::random();
    let mut store = Store::open_in_memory().unwrap().with_token_key(key.clone());
    let t = active_transfer(&mut store, &key, MAX_BUDGET_MICRO_USD);
    g.bench_function("transition", |b| {
        b.iter(|| black_box(store.report_usage(&t, 1, "compute").unwrap()))
    });
    g.bench_function("lifecycle", |b| {
        b.iter(|| black_box(active_transfer(&mut store, &key, 1_000)))
    });
    g.finish();
}

criterion_group!(store_benches, benches, in_memory);
criterion_main!(store_benches);
