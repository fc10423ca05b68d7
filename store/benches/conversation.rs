//! Conversation-domain benchmarks.
//!
//! - `post_10_recipients_sync_full/store`: `post_message` into a conversation with ten agent
//!   participants (one message, ten deliveries, ten wake coalescings, the seq bump and the
//!   idempotency record), one post per transaction, on a file database with WAL and
//!   `synchronous=FULL` — every post is fsynced. Target: at least 4,000 posts/s on the
//!   development machine.
//! - `…/raw_sql`: the same rows written with hand-written SQL in one immediate transaction per
//!   post on an identically configured file, with no validation, authorization or idempotency
//!   lookup — what the store's overhead is measured against.
//! - `…/single_row_txn_floor`: one single-row transaction — what one commit costs on this disk.
//! - `post_10_recipients_sync_normal/*`: the same three with `synchronous=NORMAL` (no fsync per
//!   commit in WAL mode), which isolates the CPU cost from the disk's fsync latency.
//! - `wake_cycle/claim_dispatch_consume`: one claim → prepare_dispatch → consume_wake cycle (three
//!   transactions), with the post that makes the wake pending done outside the timing.
//! - `agents_among_a_million/create_agent`: one `create_agent` (fsynced) in a store that
//!   already holds 1,000,000 agents (written with one SQL statement, the count with them): the
//!   store-wide ceiling is one maintained row (migration 0015). Beside it,
//!   `…/count_agents_raw`: the `SELECT count(*) FROM agents` each insert paid before, alone,
//!   and `…/single_row_txn_floor`.
//!
//! Run with `cargo bench -p ahp-store --bench conversation` (`-- agents_among` for the last
//! group alone: ~1 min, most of it writing the million rows).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use ahp_store::Store;
use ahp_store::conversation::*;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const RECIPIENTS: usize = 10;

fn card(i: usize) -> AgentCard {
    AgentCard {
        handle: format!("agent-{i}"),
        display_name: format!("Agent {i}"),
        description: "benchmark recipient".into(),
        specialties: vec!["bench".into()],
    }
}

/// A store on a fresh file under cargo's target tmpdir (a real disk, not tmpfs), with a
/// conversation of [`RECIPIENTS`] agents.
fn setup(dir: &Path) -> (Store, Caller, Vec<Agent>, Conversation) {
    let mut store = Store::open(dir.join("bench.db")).unwrap();
    let alice = Caller::full("account:bench").unwrap();
    let agents: Vec<Agent> = (0..RECIPIENTS)
        .map(|i| {
            store
                .create_agent(&alice, &card(i), &format!("agent-{i}"))
                .unwrap()
                .value
        })
        .collect();
    let new = NewConversation {
        title: "bench".into(),
        agents: agents.iter().map(|a| a.id.clone()).collect(),
    };
    let cv = store.create_conversation(&alice, &new, "cv").unwrap().value;
    (store, alice, agents, cv)
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

const BODY: &str = "A short message of the usual size for a chat between agents.";

fn post(c: &mut Criterion) {
    for (label, sync, level) in [("full", "FULL", 2i64), ("normal", "NORMAL", 1)] {
        let mut g = c.benchmark_group(format!("post_10_recipients_sync_{label}"));
        g.throughput(Throughput::Elements(1));

        let dir = tmpdir();
        let (mut store, alice, _agents, cv) = setup(dir.path());
        store.connection().pragma_update(None, "synchronous", sync).unwrap();
        let got: i64 = store
            .connection()
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap();
        assert_eq!(got, level);
        let mut n = 0u64;
        g.bench_function("store", |b| {
            b.iter(|| {
                n += 1;
                let m = NewMessage {
                    conversation: cv.id.clone(),
                    acting: Acting::Human,
                    body: BODY.into(),
                    reply_to: None,
                    idempotency: IdempotencyKey::Key(format!("post-{n}")),
                };
                black_box(store.post_message(&alice, &m).unwrap());
            })
        });

        let raw_dir = tmpdir();
        let (mut raw, alice, agents, cv) = setup(raw_dir.path());
        let principal = alice.principal().as_str().to_owned();
        let conn = raw.connection();
        conn.pragma_update(None, "synchronous", sync).unwrap();
        let mut seq = 0i64;
        g.bench_function("raw_sql", |b| {
            b.iter(|| {
                seq += 1;
                raw_post(conn, &principal, &cv.id, &agents, seq);
            })
        });

        // The floor: one single-row transaction, i.e. what one commit costs on this disk.
        let floor_dir = tmpdir();
        let mut floor = rusqlite::Connection::open(floor_dir.path().join("floor.db")).unwrap();
        floor
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            .unwrap();
        floor.pragma_update(None, "synchronous", sync).unwrap();
        floor.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let mut x = 0i64;
        g.bench_function("single_row_txn_floor", |b| {
            b.iter(|| {
                x += 1;
                let tx = floor
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .unwrap();
                tx.execute("INSERT INTO t (x) VALUES (?1)", [x]).unwrap();
                tx.commit().unwrap();
            })
        });
        g.finish();
    }
}

/// The rows one post writes, with plain SQL and none of the store's checks.
fn raw_post(conn: &mut rusqlite::Connection, principal: &str, cv: &str, agents: &[Agent], seq: i64) {
    let now = seq;
    let id = format!("msg_{seq:024x}");
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    tx.prepare_cached(
        "INSERT INTO messages (id, conversation_id, seq, author_kind, author_principal, body, created_at)
         VALUES (?1, ?2, ?3, 'human', ?4, ?5, ?6)",
    )
    .unwrap()
    .execute((&id, cv, seq, principal, BODY, now))
    .unwrap();
    tx.prepare_cached("UPDATE conversations SET next_seq = next_seq + 1, updated_at = ?2 WHERE id = ?1")
        .unwrap()
        .execute((cv, now))
        .unwrap();
    for a in agents {
        let order: i64 = tx
            .prepare_cached(
                "INSERT INTO deliveries (message_id, recipient_agent_id, delivery_order, state, created_at)
                 VALUES (?1, ?2, (SELECT coalesce(max(delivery_order), 0) + 1 FROM deliveries WHERE recipient_agent_id = ?2),
                         'queued', ?3)
                 RETURNING delivery_order",
            )
            .unwrap()
            .query_row((&id, &a.id, now), |r| r.get(0))
            .unwrap();
        let updated = tx
            .prepare_cached(
                "UPDATE wakes SET delivery_count = delivery_count + 1, high_water_order = ?2, updated_at = ?3
                 WHERE agent_id = ?1 AND state IN ('pending', 'claimed')",
            )
            .unwrap()
            .execute((&a.id, order, now))
            .unwrap();
        if updated == 0 {
            tx.prepare_cached(
                "INSERT INTO wakes (id, agent_id, state, delivery_count, first_delivery_order, high_water_order, created_at, updated_at)
                 VALUES (?1, ?2, 'pending', 1, ?3, ?3, ?4, ?4)",
            )
            .unwrap()
            .execute((format!("wk_{seq:012x}{order:012x}"), &a.id, order, now))
            .unwrap();
        }
    }
    tx.prepare_cached(
        "INSERT INTO communication_idempotency (principal, operation, key_hash, request_hash, resource_id, created_at)
         VALUES (?1, 'post_message', ?2, ?3, ?4, ?5)",
    )
    .unwrap()
    .execute((principal, format!("{seq:064x}"), format!("{seq:064x}"), &id, now))
    .unwrap();
    tx.commit().unwrap();
}

fn wake_cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("wake_cycle");
    g.throughput(Throughput::Elements(1));
    let dir = tmpdir();
    let (mut store, alice, agents, cv) = setup(dir.path());
    let ep = store
        .attach_endpoint(&alice, &agents[0].id, Duration::from_secs(3600), "attach")
        .unwrap()
        .value;
    store
        .register_wake_carrier(&ep.agent_id, &ep.id, ep.generation)
        .unwrap();
    let actor = AgentActor::of(&ep);
    let mut n = 0u64;
    g.bench_function("claim_dispatch_consume", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let m = NewMessage {
                    conversation: cv.id.clone(),
                    acting: Acting::Human,
                    body: "wake up".into(),
                    reply_to: None,
                    idempotency: IdempotencyKey::Key(format!("wake-{n}")),
                };
                store.post_message(&alice, &m).unwrap();
                let start = Instant::now();
                let claim = store
                    .claim_wake(&alice, &actor, Duration::from_secs(60))
                    .unwrap()
                    .expect("a pending wake");
                let ticket = store.prepare_dispatch(&alice, &actor, &claim.attempt.id).unwrap();
                black_box(
                    store
                        .consume_wake(&alice, &actor, &claim.wake.id, &ticket.consume_token)
                        .unwrap(),
                );
                total += start.elapsed();
            }
            total
        })
    });
    g.finish();
}

/// Agents already in the store for [`agents_among_a_million`].
const MILLION: i64 = 1_000_000;

fn agents_among_a_million(c: &mut Criterion) {
    let mut g = c.benchmark_group("agents_among_a_million");
    g.throughput(Throughput::Elements(1));
    let dir = tmpdir();
    let (mut store, _, _, _) = setup(dir.path());
    {
        let conn = store.connection();
        let tx = conn.transaction().unwrap();
        tx.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO agents (id, owner_principal, handle, display_name, description, specialties,
                                 profile_revision, created_at, updated_at)
             SELECT 'agt_' || CAST(100000000000000000 + i AS TEXT) || '000000', 'owner-' || (i % 5000),
                    'h', 'H', '', '[]', 1, 0, 0 FROM n",
            [MILLION],
        )
        .unwrap();
        tx.execute("UPDATE agent_total SET agents = agents + ?1", [MILLION])
            .unwrap();
        tx.commit().unwrap();
    }
    let mut n = 0usize;
    g.bench_function("create_agent", |b| {
        b.iter(|| {
            n += 1;
            // A principal per 200 agents: the per-principal ceiling (256) is never met.
            let who = Caller::full(&format!("account:many-{}", n / 200)).unwrap();
            black_box(store.create_agent(&who, &card(n), &format!("many-{n}")).unwrap());
        })
    });
    g.bench_function("count_agents_raw", |b| {
        b.iter(|| {
            let total: i64 = store
                .connection()
                .query_row("SELECT count(*) FROM agents", [], |r| r.get(0))
                .unwrap();
            black_box(total)
        })
    });
    store
        .connection()
        .execute_batch("CREATE TABLE floor (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
        .unwrap();
    g.bench_function("single_row_txn_floor", |b| {
        b.iter(|| {
            let conn = store.connection();
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .unwrap();
            tx.execute("INSERT INTO floor (v) VALUES (1)", []).unwrap();
            tx.commit().unwrap();
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = post, wake_cycle, agents_among_a_million
}
criterion_main!(benches);
