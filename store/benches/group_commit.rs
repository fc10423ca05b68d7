//! Group commit (issue 20): posts with fan-out 10 from many producers through one
//! [`StorePool`], beside the raw single-row commit rate of the same disk in the same run.
//!
//! Rows, each a timed window of `AHP_BENCH_SECS` seconds (default 3) after a 0.5 s warm-up,
//! on a fresh SQLite file under cargo's target tmpdir (the repository's disk):
//!
//! - `raw_commit` — the baseline: one single-row `INSERT` in its own `BEGIN IMMEDIATE`
//!   transaction on rusqlite itself, WAL, `synchronous=FULL` (one fsync per commit).
//! - `post_fanout10/separate` — before group commit: every producer its own `Store::open`
//!   connection (`synchronous=FULL`), one fsync per post, the writers serialized by SQLite's
//!   lock and its busy handler.
//! - `post_fanout10/pool` — a `StorePool` of `min(producers, 64)` connections sharing one
//!   `GroupCommit`: each post its own transaction, its fsync shared with whoever committed
//!   meanwhile.
//!
//! Each producer is a thread posting as a human into its own conversation with the same 10
//! agents (message, 10 deliveries, 10 wake coalescings, the seq bump, the idempotency record).
//! The table gives posts/s, the ratio to `raw_commit`'s rate measured just before at one
//! client, p50/p99 latency and, for the pool, posts per fsync. `AHP_BENCH_PRODUCERS` (default
//! `1,8,64`) sets the producer counts.
//!
//! Run with `cargo bench -p ahp-store --bench group_commit`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ahp_store::conversation::{Acting, AgentCard, Caller, IdempotencyKey, NewConversation, NewMessage};
use ahp_store::{Store, StorePool};

const FANOUT: usize = 10;

fn secs() -> Duration {
    let s: f64 = std::env::var("AHP_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3.0);
    Duration::from_secs_f64(s)
}

fn producers() -> Vec<usize> {
    std::env::var("AHP_BENCH_PRODUCERS")
        .unwrap_or_else(|_| "1,8,64".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect()
}

/// Runs `op` on `threads` threads for the warm-up, then for the window; returns ops/s and the
/// window's sorted latencies.
fn timed(threads: usize, op: impl Fn(usize, u64) + Sync) -> (f64, Vec<Duration>) {
    let stop = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let start = Barrier::new(threads + 1);
    let mut all = Vec::new();
    let elapsed = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (op, stop, measuring, start) = (&op, &stop, &measuring, &start);
                s.spawn(move || {
                    let mut lat = Vec::new();
                    start.wait();
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let began = Instant::now();
                        op(t, i);
                        if measuring.load(Ordering::Relaxed) {
                            lat.push(began.elapsed());
                        }
                        i += 1;
                    }
                    lat
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(Duration::from_millis(500));
        measuring.store(true, Ordering::Relaxed);
        let began = Instant::now();
        std::thread::sleep(secs());
        measuring.store(false, Ordering::Relaxed);
        let elapsed = began.elapsed();
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            all.extend(h.join().unwrap());
        }
        elapsed
    });
    all.sort();
    (all.len() as f64 / elapsed.as_secs_f64(), all)
}

fn pct(lat: &[Duration], p: f64) -> String {
    if lat.is_empty() {
        return "—".into();
    }
    let d = lat[((lat.len() - 1) as f64 * p) as usize];
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.db"))
}

fn raw_commit(dir: &Path, round: usize) -> (f64, Vec<Duration>) {
    let path = fresh(dir, &format!("raw-{round}"));
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
        .unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    let conn = std::sync::Mutex::new(conn);
    timed(1, |_, i| {
        let c = conn.lock().unwrap();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        c.execute("INSERT INTO t (v) VALUES (?1)", [format!("row {i}")])
            .unwrap();
        c.execute_batch("COMMIT").unwrap();
    })
}

/// The 10 agents and one conversation per producer, made through `store`.
fn setup(store: &mut Store, producers: usize) -> (Caller, Vec<String>) {
    let alice = Caller::full("account:alice").unwrap();
    let agents: Vec<String> = (0..FANOUT)
        .map(|i| {
            let card = AgentCard {
                handle: format!("a{i}"),
                display_name: format!("Agent {i}"),
                description: "receives posts".into(),
                specialties: vec![],
            };
            store
                .create_agent(&alice, &card, &format!("agent-{i}"))
                .unwrap()
                .value
                .id
        })
        .collect();
    let conversations = (0..producers)
        .map(|p| {
            let new = NewConversation {
                title: format!("producer {p}"),
                agents: agents.clone(),
            };
            store
                .create_conversation(&alice, &new, &format!("cv-{p}"))
                .unwrap()
                .value
                .id
        })
        .collect();
    (alice, conversations)
}

fn post(store: &mut Store, alice: &Caller, cv: &str, t: usize, i: u64) {
    let new = NewMessage {
        conversation: cv.into(),
        acting: Acting::Human,
        body: format!("post {i} from {t}"),
        reply_to: None,
        idempotency: IdempotencyKey::Key(format!("p{t}-{i}")),
    };
    // A busy refusal after the store's attempts (separate connections only) is retried, as a
    // client would.
    while let Err(e) = store.post_message(alice, &new) {
        assert!(e.is_transient(), "{e}");
    }
}

fn separate(dir: &Path, producers: usize) -> (f64, Vec<Duration>) {
    let path = fresh(dir, &format!("separate-{producers}"));
    let (alice, cvs) = setup(&mut Store::open(&path).unwrap(), producers);
    let stores: Vec<_> = (0..producers)
        .map(|_| std::sync::Mutex::new(Store::open(&path).unwrap()))
        .collect();
    timed(producers, |t, i| {
        post(&mut stores[t].lock().unwrap(), &alice, &cvs[t], t, i)
    })
}

fn pooled(dir: &Path, producers: usize) -> (f64, Vec<Duration>, f64) {
    let path = fresh(dir, &format!("pool-{producers}"));
    let pool = Arc::new(StorePool::open(&path, producers.min(ahp_store::MAX_POOL_CONNECTIONS), Ok).unwrap());
    let (alice, cvs) = setup(&mut pool.get(), producers);
    let before = pool.group().unwrap().stats();
    let (rate, lat) = timed(producers, |t, i| post(&mut pool.get(), &alice, &cvs[t], t, i));
    let after = pool.group().unwrap().stats();
    let per_sync = (after.commits - before.commits) as f64 / (after.syncs - before.syncs).max(1) as f64;
    (rate, lat, per_sync)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list here.
    }
    let dir = tempfile::Builder::new()
        .prefix("group-commit-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    println!("| op | producers | posts/s | × raw commits/s | p50 | p99 | posts per fsync |");
    println!("|---|---|---|---|---|---|---|");
    for n in producers() {
        let (raw, raw_lat) = raw_commit(dir.path(), n);
        println!(
            "| `raw_commit` (baseline) | 1 | {raw:.0} | 1 | {} | {} | 1 |",
            pct(&raw_lat, 0.5),
            pct(&raw_lat, 0.99)
        );
        let (rate, lat) = separate(dir.path(), n);
        println!(
            "| `post_fanout10/separate` | {n} | {rate:.0} | {:.2}× | {} | {} | 1 |",
            rate / raw,
            pct(&lat, 0.5),
            pct(&lat, 0.99)
        );
        let (rate, lat, per_sync) = pooled(dir.path(), n);
        println!(
            "| `post_fanout10/pool` | {n} | {rate:.0} | {:.2}× | {} | {} | {per_sync:.1} |",
            rate / raw,
            pct(&lat, 0.5),
            pct(&lat, 0.99)
        );
    }
}
