//! Density: how many live idle sandboxes one process holds, and the RSS each costs.
//!
//! Activates `AHP_DENSITY_N` (default 10,000) forecaster transfers for real (store included)
//! and keeps every sandbox live, on an engine sized for them (pool of N + 16 slots, 32 MiB
//! memory slots: the nano tier's ceiling). Prints RSS and memory mappings before and after.
//! `cargo bench -p ahp-host --bench density`

use std::time::Instant;

use ahp_host::sandbox::engine::EngineConfig;
use ahp_host::shared_store::StoreLock;
use ahp_host::testing;

mod common;

fn proc_status(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

fn maps() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: u32 = std::env::var("AHP_DENSITY_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let b = common::host(|c| {
        *c = EngineConfig {
            max_live_sandboxes: n + 16,
            max_memory_bytes: ahp_host::store::Tier::Nano.limits().memory_bytes,
            max_table_elements: ahp_host::store::Tier::Nano.limits().table_elements,
            ..EngineConfig::default()
        };
    });
    let snap = testing::snapshot(4, testing::inventory());
    // Warm up: one activation, so lazily initialised host state is not charged to the first N.
    b.active(&snap, "forecaster", false);
    let (rss0, maps0) = (proc_status("VmRSS:"), maps());
    let started = Instant::now();
    for i in 0..n {
        b.active(&snap, "forecaster", true);
        if (i + 1) % 2_000 == 0 {
            eprintln!("{} live, RSS {} MiB", i + 1, proc_status("VmRSS:") / 1024);
        }
    }
    let elapsed = started.elapsed();
    let (rss1, maps1) = (proc_status("VmRSS:"), maps());
    let db_kib = {
        let mut db = b.host.store().locked();
        let conn = db.connection();
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
        let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
        (pages * size / 1024) as u64
    };
    assert_eq!(b.sandboxes.live_count(), n as usize);
    let per = (rss1.saturating_sub(rss0)).saturating_sub(db_kib) as f64 / f64::from(n);
    println!("live sandboxes:            {n}");
    println!(
        "activation (incl. store):  {:.1} µs each",
        elapsed.as_micros() as f64 / f64::from(n)
    );
    println!("RSS before / after:        {} / {} MiB", rss0 / 1024, rss1 / 1024);
    println!("in-memory store:           {} MiB (subtracted)", db_kib / 1024);
    println!("RSS per live sandbox:      {per:.1} KiB");
    println!("memory mappings:           {maps0} -> {maps1} (vm.max_map_count caps a process)");
}
