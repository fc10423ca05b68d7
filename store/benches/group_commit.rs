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
//! Before the table, the pages one post dirties: after [`PAGES_WARM_POSTS`] posts into one
//! conversation with the 10 agents (a warm database, as a store in use is), the WAL is
//! truncated, [`PAGES_MEASURED_POSTS`] more posts are made, and the WAL's frames are counted
//! (`PRAGMA wal_checkpoint(PASSIVE)`'s log size): each commit writes every page it dirtied as
//! one frame. Beside it, the same count for the single-row commit of `raw_commit`, and for
//! the 10 delivery rows of a post alone (raw SQL, the same warm-up) in the inbox's two
//! designs: `deliveries/rowid` (migration 0002: rows in insertion order, the inbox an index by
//! recipient) and `deliveries/clustered` (migration 0013: rows keyed by recipient and their
//! per-recipient counter, an inbox one contiguous range).
//!
//! Run with `cargo bench -p ahp-store --bench group_commit`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ahp_store::conversation::{Acting, AgentCard, Caller, IdempotencyKey, NewConversation, NewMessage};
use ahp_store::{Store, StorePool};

const FANOUT: usize = 10;

/// Posts made before the pages of a post are counted.
const PAGES_WARM_POSTS: u64 = 3000;

/// Posts whose WAL frames are counted: few enough that SQLite's autocheckpoint (at 1,000
/// frames) cannot run among them.
const PAGES_MEASURED_POSTS: u64 = 20;

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

/// The WAL frames in the file at `path` (written since the WAL last restarted), read on a
/// connection of its own.
fn wal_frames(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
        .unwrap()
}

/// Empties the WAL of the file at `path` into the database, so that the next commit writes
/// its frames from the start.
fn truncate_wal(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let busy: i64 = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .unwrap();
    assert_eq!(busy, 0, "the WAL could not be truncated");
}

/// The WAL frames of the file at `path` by the table or index whose page each one is
/// (SQLite's `dbstat`), most first. A WAL frame is a 24-byte header, whose first four bytes
/// are the page number, then the page.
fn wal_frames_by_btree(path: &Path) -> Vec<(String, usize)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let page_size: usize = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let mut owner = std::collections::HashMap::new();
    let mut stmt = conn.prepare("SELECT name, pageno FROM dbstat").unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(1)? as u32, r.get::<_, String>(0)?)))
        .unwrap();
    for row in rows {
        let (page, name) = row.unwrap();
        owner.insert(page, name);
    }
    let wal = std::fs::read(path.with_extension("db-wal")).unwrap();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for frame in wal[32..].chunks_exact(24 + page_size) {
        let page = u32::from_be_bytes(frame[..4].try_into().unwrap());
        let name = owner.get(&page).cloned().unwrap_or_else(|| "(free or header)".into());
        *counts.entry(name).or_default() += 1;
    }
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    counts
}

/// The inbox's table before migration 0013 (0002's) and after it, without the foreign keys.
const DELIVERIES_ROWID: &str = "CREATE TABLE deliveries (
    delivery_order INTEGER PRIMARY KEY, message_id TEXT NOT NULL, recipient_agent_id TEXT NOT NULL,
    state TEXT NOT NULL, created_at INTEGER NOT NULL, consumed_at INTEGER,
    UNIQUE (message_id, recipient_agent_id)) STRICT;
CREATE INDEX deliveries_by_recipient ON deliveries (recipient_agent_id, delivery_order);";
const DELIVERIES_CLUSTERED: &str = "CREATE TABLE deliveries (
    recipient_agent_id TEXT NOT NULL, delivery_order INTEGER NOT NULL, message_id TEXT NOT NULL,
    state TEXT NOT NULL, created_at INTEGER NOT NULL, consumed_at INTEGER,
    PRIMARY KEY (recipient_agent_id, delivery_order),
    UNIQUE (message_id, recipient_agent_id)) STRICT, WITHOUT ROWID;";

/// Pages (WAL frames) per commit of one post's 10 delivery rows alone in the table `schema`
/// creates, raw SQL, after the same warm-up as [`pages_per_post`]'s. Ids are the store's
/// (random); `delivery_order` counts each recipient's deliveries when `per_recipient`, else
/// every delivery (0002's rowid).
fn delivery_pages(dir: &Path, name: &str, schema: &str, per_recipient: bool) -> f64 {
    let path = fresh(dir, name);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
        .unwrap();
    conn.execute_batch(schema).unwrap();
    let agents: Vec<String> = (0..FANOUT).map(|_| ahp_store::id::new_id("ag_")).collect();
    let mut posts = 0_i64;
    let mut post = || {
        posts += 1;
        let message = ahp_store::id::new_id("msg_");
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        for (i, agent) in agents.iter().enumerate() {
            let order = if per_recipient {
                posts
            } else {
                posts * FANOUT as i64 + i as i64
            };
            conn.prepare_cached(
                "INSERT INTO deliveries (recipient_agent_id, delivery_order, message_id, state, created_at) \
                 VALUES (?1, ?2, ?3, 'queued', ?4)",
            )
            .unwrap()
            .execute((agent, order, &message, posts))
            .unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
    };
    for _ in 0..PAGES_WARM_POSTS {
        post();
    }
    truncate_wal(&path);
    for _ in 0..PAGES_MEASURED_POSTS {
        post();
    }
    wal_frames(&path) as f64 / PAGES_MEASURED_POSTS as f64
}

/// Pages (WAL frames) per fan-out-10 post on a warm database, and per raw single-row commit;
/// the post's frames by table or index.
fn pages_per_post(dir: &Path) -> (f64, f64, Vec<(String, usize)>) {
    let path = fresh(dir, "pages");
    let mut store = Store::open(&path).unwrap();
    let (alice, cvs) = setup(&mut store, 1);
    for i in 0..PAGES_WARM_POSTS {
        post(&mut store, &alice, &cvs[0], 0, i);
    }
    truncate_wal(&path);
    for i in PAGES_WARM_POSTS..PAGES_WARM_POSTS + PAGES_MEASURED_POSTS {
        post(&mut store, &alice, &cvs[0], 0, i);
    }
    let post_pages = wal_frames(&path) as f64 / PAGES_MEASURED_POSTS as f64;
    let by_btree = wal_frames_by_btree(&path);

    let raw = fresh(dir, "pages-raw");
    let conn = rusqlite::Connection::open(&raw).unwrap();
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
        .unwrap();
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    for i in 0..PAGES_WARM_POSTS {
        conn.execute("INSERT INTO t (v) VALUES (?1)", [format!("row {i}")])
            .unwrap();
    }
    truncate_wal(&raw);
    for i in 0..PAGES_MEASURED_POSTS {
        conn.execute("INSERT INTO t (v) VALUES (?1)", [format!("row {i}")])
            .unwrap();
    }
    let raw_pages = wal_frames(&raw) as f64 / PAGES_MEASURED_POSTS as f64;
    (post_pages, raw_pages, by_btree)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list here.
    }
    let dir = tempfile::Builder::new()
        .prefix("group-commit-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let (post_pages, raw_pages, by_btree) = pages_per_post(dir.path());
    println!(
        "pages per commit after {PAGES_WARM_POSTS} posts (WAL frames over {PAGES_MEASURED_POSTS} commits): \
         post_fanout10 {post_pages:.1}, raw_commit {raw_pages:.1}"
    );
    let per_post: Vec<String> = by_btree
        .iter()
        .map(|(name, n)| format!("{name} {:.1}", *n as f64 / PAGES_MEASURED_POSTS as f64))
        .collect();
    println!("a post's pages by table or index: {}", per_post.join(", "));
    println!(
        "a post's 10 delivery rows alone, raw SQL: deliveries/rowid {:.1}, deliveries/clustered {:.1}\n",
        delivery_pages(dir.path(), "deliveries-rowid", DELIVERIES_ROWID, false),
        delivery_pages(dir.path(), "deliveries-clustered", DELIVERIES_CLUSTERED, true)
    );
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
