//! MCP round trips against the real `ahp serve --stdio`, through rmcp's client.
//!
//! - `mcp_stdio/get_status`: one `tools/call get_status` on a transfer with a short event log,
//!   client → pipe → server → store → back. Target p50 ≤ 200 µs.
//! - `mcp_stdio/baseline_store_get_status`: the same read straight from the store in this
//!   process — what the MCP layer adds is the difference.
//! - `mcp_activate/mcp_stdio`: `tools/call activate` end to end — token check and
//!   `begin_activation` commit, instantiating the `forecaster` from its cached `InstancePre`,
//!   its `resume` (snapshot reads, an audited vault resolution and a checkpoint save, held with
//!   the meter's settlement for) the `complete_activation` commit, then the agent's bind, all on the
//!   server's file database with `synchronous=FULL`. Target p50 ≤ 5 ms. Each transfer is
//!   snapshotted, provisioned and pushed outside the timing, and terminated after it (the
//!   server's one-second sweep then drops its sandbox).
//! - `mcp_activate/in_process`: the same activation by `Host::activate` in this process on
//!   an identically configured file database: what MCP and the process boundary add.
//! - `mcp_activate/warm_resume`: baseline — a fresh sandbox of the forecaster from its cached
//!   `InstancePre` and its `resume`, its writes held and dropped: the activation without its
//!   commits. Target: `mcp_stdio` p50 ≤ 3 × `raw_sqlite_commit` + this.
//! - `mcp_activate/raw_sqlite_commit`: one single-row commit on the same disk — the price of
//!   each of the activation's fsyncs right now.
//!
//! Run: `cargo bench -p ahp-host --bench mcp`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use ahp_guests as guests;
use ahp_host::host::HostBuilder;
use ahp_host::sandbox::{Call, RunOutcome};
use ahp_host::testing;
use ahp_store::{SnapshotInput, Store, Tier, TokenKey, TransferStatus};
use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};

/// The token secret the bench and the server share, so the bench can mint tokens.
const SECRET: &str = "bench-secret-bench-secret-bench-secret";

/// The forecaster's session: one message and its inventory.
fn snapshot() -> SnapshotInput {
    testing::snapshot(1, testing::inventory())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// `ahp serve --stdio` on `dir`, sweeping finished sandboxes every second.
fn serve(runtime: &tokio::runtime::Runtime, dir: &Path) -> RunningService<RoleClient, ()> {
    runtime.block_on(async {
        let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ahp")).configure(|c| {
            c.env("AHP_TRANSFER_TOKEN_SECRET", SECRET)
                .arg("--data-dir")
                .arg(dir)
                .args(["serve", "--stdio", "--reap-every", "1s"]);
        });
        ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
    })
}

fn call(
    runtime: &tokio::runtime::Runtime,
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: serde_json::Value,
) -> serde_json::Value {
    let params = CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
    let r = runtime.block_on(client.call_tool(params)).unwrap();
    assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
    r.structured_content.unwrap()
}

fn get_status(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap();
    let t = store.snapshot_state(&snapshot()).unwrap().id;
    let runtime = runtime();
    let client = serve(&runtime, dir.path());
    let args = serde_json::json!({ "transferId": t });

    let mut g = c.benchmark_group("mcp_stdio");
    g.measurement_time(Duration::from_secs(6)).sample_size(50);
    g.bench_function("get_status", |b| {
        b.iter(|| black_box(call(&runtime, &client, "get_status", args.clone())))
    });
    g.bench_function("baseline_store_get_status", |b| {
        b.iter(|| black_box(store.get_status(&t).unwrap()))
    });
    g.finish();
    runtime.block_on(async { client.cancel().await.unwrap() });
}

/// A pushed transfer running the forecaster, and a fresh `activate` token for it.
fn pushed(store: &mut Store, key: &TokenKey) -> (String, String) {
    let id = testing::pushed(store, key, &snapshot(), Tier::Small, 10_000_000, "forecaster").unwrap();
    let tok = testing::activate_token(store, key, &id).unwrap();
    (id, tok)
}

/// Times `activate` alone over `iters` fresh transfers; each is terminated afterwards.
fn time_activations(iters: u64, store: &mut Store, key: &TokenKey, mut activate: impl FnMut(&str, &str)) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let (id, tok) = pushed(store, key);
        let t0 = Instant::now();
        activate(&id, &tok);
        total += t0.elapsed();
        store.terminate(&id, "benchmark done").unwrap();
    }
    total
}

fn activate(c: &mut Criterion) {
    let key = TokenKey::new(SECRET).unwrap();
    let mut g = c.benchmark_group("mcp_activate");
    g.measurement_time(Duration::from_secs(8)).sample_size(20);

    // Through MCP: the server registers nothing by itself, so the operator's steps come first.
    let dir = tempfile::tempdir().unwrap();
    let added = std::process::Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["component", "add", guests::FORECASTER, "--name", "forecaster"])
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    std::fs::write(dir.path().join("vault/inventory-api"), "sk-bench").unwrap();
    ahp_host::testing::policy().save(dir.path()).unwrap();
    let mut store = Store::open(dir.path().join("ahp.db"))
        .unwrap()
        .with_token_key(key.clone());
    let runtime = runtime();
    let client = serve(&runtime, dir.path());
    g.bench_function("mcp_stdio", |b| {
        b.iter_custom(|iters| {
            time_activations(iters, &mut store, &key, |id, tok| {
                let r = call(
                    &runtime,
                    &client,
                    "activate",
                    serde_json::json!({ "transferId": id, "token": tok }),
                );
                assert_eq!(r["status"], "active");
            })
        })
    });
    runtime.block_on(async { client.cancel().await.unwrap() });

    // In process, on its own file database configured the same way.
    let dir = tempfile::tempdir().unwrap();
    let host = HostBuilder::new(
        Store::open(dir.path().join("ahp.db"))
            .unwrap()
            .with_token_key(key.clone()),
        dir.path(),
    )
    .policy(ahp_host::testing::policy())
    .build()
    .unwrap();
    std::fs::write(dir.path().join("vault/inventory-api"), "sk-bench").unwrap();
    let sandboxes = host.sandboxes().clone();
    sandboxes
        .register_component_file(guests::FORECASTER, Some("forecaster"))
        .unwrap();
    let mut store = Store::open(dir.path().join("ahp.db"))
        .unwrap()
        .with_token_key(key.clone());
    g.bench_function("in_process", |b| {
        b.iter_custom(|iters| {
            time_activations(iters, &mut store, &key, |id, tok| {
                let r = host.activate(id, tok).unwrap();
                assert_eq!(
                    (r.outcome, r.transfer.status),
                    (RunOutcome::Returned, TransferStatus::Active)
                );
                sandboxes.drop_sandbox(id);
            })
        })
    });

    // The other baseline: the warm resume alone — a fresh sandbox from the cached
    // `InstancePre` and the forecaster's `resume`, its writes held and dropped (no commit).
    let (id, tok) = pushed(&mut store, &key);
    host.activate(&id, &tok).unwrap();
    sandboxes.drop_sandbox(&id);
    let active = store.transfer(&id).unwrap();
    g.bench_function("warm_resume", |b| {
        b.iter(|| {
            let mut sandbox = sandboxes.prepare(&active).unwrap();
            sandbox.hold_activation_writes();
            let run = sandboxes.run(&mut sandbox, Call::Resume);
            assert_eq!(run.outcome, RunOutcome::Returned);
            black_box(sandbox.take_activation_writes());
        })
    });

    // The floor: one single-row commit on the same disk, same pragmas.
    let raw = rusqlite::Connection::open(dir.path().join("raw.db")).unwrap();
    raw.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
         CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL);",
    )
    .unwrap();
    g.bench_function("raw_sqlite_commit", |b| {
        b.iter(|| {
            raw.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (v) VALUES ('x'); COMMIT;")
                .unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, get_status, activate);
criterion_main!(benches);
