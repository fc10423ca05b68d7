//! Criterion benchmarks of the destination sandbox (method and figures: BENCHMARKS.md).
//!
//! - `warm_activate`: instantiate + `resume` from the cached `InstancePre`, beside raw wasmtime
//!   (default engine: no fuel, epochs, limits or pooling) running the same component with the
//!   same host functions. `…/excluding_store/…` subtracts the time the turn's host calls spent
//!   in the (in-memory) database, which the target excludes.
//! - `guest_to_host_call`: one `snapshot.transfer-id` call.
//! - `fuel_overhead_5M_rounds`: a CPU-bound guest with fuel and epochs on vs raw wasmtime.
//!
//! `cargo bench -p ahp-host --bench sandbox`

use std::time::{Duration, Instant};

use ahp_guests as guests;
use ahp_host::sandbox::RunOutcome;
use ahp_host::sandbox::baseline::RawRunner;
use ahp_host::testing;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

mod common;

fn warm_activate(c: &mut Criterion) {
    let b = common::host(|_| {});
    let mut g = c.benchmark_group("warm_activate");
    for (label, component, snap) in [
        ("forecaster", "forecaster", testing::snapshot(4, testing::inventory())),
        ("minimal", "cpu-burn", testing::snapshot(0, json!({ "rounds": 0 }))),
    ] {
        let t = b.active(&snap, component, false);
        let path = guests::ALL.iter().find(|(n, _)| *n == component).unwrap().1;
        let raw = RawRunner::new(&b.sandboxes, &std::fs::read(path).unwrap(), &t).unwrap();
        let sandbox = || {
            let (outcome, store_time) = b.sandboxes.trial_resume(&t).unwrap();
            assert_eq!(outcome, RunOutcome::Returned);
            store_time
        };
        let raw_turn = || {
            let (resumed, store_time) = raw.run().unwrap();
            assert!(resumed);
            store_time
        };
        g.bench_function(format!("sandbox/{label}"), |bench| bench.iter(sandbox));
        g.bench_function(format!("raw_wasmtime/{label}"), |bench| bench.iter(raw_turn));
        g.bench_function(format!("excluding_store/sandbox/{label}"), |bench| {
            bench.iter_custom(|iters| excluding_store(iters, sandbox))
        });
        g.bench_function(format!("excluding_store/raw_wasmtime/{label}"), |bench| {
            bench.iter_custom(|iters| excluding_store(iters, raw_turn))
        });
    }
    g.finish();
}

/// Wall time of `iters` runs of `turn` minus the store time each reports.
fn excluding_store(iters: u64, turn: impl Fn() -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let t0 = Instant::now();
        let store_time = turn();
        total += t0.elapsed().saturating_sub(store_time);
    }
    total
}

fn guest_to_host_call(c: &mut Criterion) {
    const CALLS: u64 = 10_000;
    let b = common::host(|_| {});
    let none = b.active(
        &testing::snapshot(0, json!({ "rounds": 0, "hostCalls": 0 })),
        "cpu-burn",
        false,
    );
    let many = b.active(
        &testing::snapshot(0, json!({ "rounds": 0, "hostCalls": CALLS })),
        "cpu-burn",
        false,
    );
    let mut g = c.benchmark_group("guest_to_host_call");
    // Per call: (a turn making 10,000 `snapshot.transfer-id` calls − a turn making none) / 10,000.
    g.bench_function("snapshot.transfer-id", |bench| {
        bench.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                b.sandboxes.trial_resume(&many).unwrap();
                let t1 = Instant::now();
                b.sandboxes.trial_resume(&none).unwrap();
                let t2 = Instant::now();
                total += (t1 - t0).saturating_sub(t2 - t1);
            }
            total / CALLS as u32
        });
    });
    g.finish();
}

fn fuel_overhead(c: &mut Criterion) {
    let b = common::host(|_| {});
    let t = b.active(&testing::snapshot(0, json!({ "rounds": 5_000_000 })), "cpu-burn", false);
    let raw = RawRunner::new(&b.sandboxes, &std::fs::read(guests::CPU_BURN).unwrap(), &t).unwrap();
    let mut g = c.benchmark_group("fuel_overhead_5M_rounds");
    g.sample_size(20);
    g.bench_function("fuel_and_epochs_on", |bench| {
        bench.iter(|| assert_eq!(b.sandboxes.trial_resume(&t).unwrap().0, RunOutcome::Returned));
    });
    g.bench_function("fuel_off_raw_wasmtime", |bench| {
        bench.iter(|| assert!(raw.run().unwrap().0))
    });
    g.finish();
}

criterion_group!(benches, warm_activate, guest_to_host_call, fuel_overhead);
criterion_main!(benches);
