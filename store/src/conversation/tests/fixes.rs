//! The store fixes: the clock read under the write lock, whole-store bounds, idempotency
//! retention, at most one unresolved dispatched wake per agent, bounded attempt listing.

use std::sync::Mutex;

use rusqlite::Connection;

use super::*;

/// A clock that, each time it is read, checks from a second connection whether the write lock
/// of the database is held — i.e. whether the store read it inside its `BEGIN IMMEDIATE`.
#[derive(Debug)]
struct LockProbe {
    other: Mutex<Connection>,
    reads: Mutex<Vec<bool>>,
}

impl crate::clock::Clock for LockProbe {
    fn now(&self) -> Timestamp {
        let other = self.other.lock().unwrap();
        let locked = other.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_err();
        self.reads.lock().unwrap().push(locked);
        Timestamp::from_micros(1_800_000_000_000_000)
    }
}

#[test]
fn writes_read_the_clock_while_holding_the_write_lock() {
    if crate::testing::skip_on_postgres("probes SQLite's database-wide write lock from a second connection") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let store = Store::open(&path).unwrap();
    let other = Connection::open(&path).unwrap();
    other.busy_timeout(Duration::ZERO).unwrap();
    let probe = Arc::new(LockProbe {
        other: Mutex::new(other),
        reads: Mutex::new(Vec::new()),
    });
    let mut store = store.with_clock(probe.clone());
    let alice = Caller::full("account:alice").unwrap();
    let a = store.create_agent(&alice, &card("a"), "a").unwrap().value;
    let ep = store.attach_endpoint(&alice, &a.id, LEASE, "e").unwrap().value;
    let new = NewConversation {
        title: "t".into(),
        agents: vec![a.id.clone()],
    };
    let cv = store.create_conversation(&alice, &new, "c").unwrap().value;
    let post = NewMessage {
        conversation: cv.id.clone(),
        acting: Acting::Human,
        body: "hi".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key("p".into()),
    };
    store.post_message(&alice, &post).unwrap();
    let actor = AgentActor::of(&ep);
    let inbox = store.read_inbox(&alice, &actor, 0, 1, true).unwrap();
    store.consume_delivery(&alice, &actor, &inbox[0].message.id).unwrap();
    let reads = probe.reads.lock().unwrap().clone();
    // The inbox read is a read transaction (no write lock), and so is the consume's first half
    // (a no-op consume never takes the lock); every write saw the lock held.
    assert_eq!(reads.len(), 7, "{reads:?}");
    assert_eq!(reads, [true, true, true, true, false, false, true]);
}

#[test]
fn agents_in_total_at_the_limit_and_one_past_it() {
    let mut w = world();
    let alice = w.alice.clone();
    // Stand in for everyone else's agents: the store's count at MAX_AGENTS - 1 (two million rows
    // would make the test slow, and the count is what the ceiling reads).
    w.store
        .autocommit()
        .execute("UPDATE agent_total SET agents = ?1", [bounds::MAX_AGENTS as i64 - 1])
        .unwrap();
    w.store.create_agent(&alice, &card("last"), "last").unwrap();
    assert_eq!(agent_total(&mut w.store), bounds::MAX_AGENTS as i64);
    let before = w.bytes();
    let err = w.store.create_agent(&alice, &card("over"), "over").unwrap_err();
    assert!(
        matches!(err, Error::LimitReached { what: "agents in total", limit } if limit == bounds::MAX_AGENTS),
        "{err}"
    );
    assert!(w.bytes() == before);
}

fn agent_total(store: &mut Store) -> i64 {
    store
        .autocommit()
        .query_row("SELECT agents FROM agent_total", [], |r| r.get(0))
        .unwrap()
}

fn created_by(store: &mut Store, owner: &Caller) -> i64 {
    store
        .autocommit()
        .query_row(
            "SELECT coalesce((SELECT agents FROM created_agents WHERE owner_principal = ?1), 0)",
            [owner.principal().as_str()],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn the_agent_counts_follow_every_agent_made_and_no_refused_one() {
    let mut w = world();
    let alice = w.alice.clone();
    let bob = w.bob.clone();
    let rows = |store: &mut Store| -> i64 {
        store
            .autocommit()
            .query_row("SELECT count(*) FROM agents", [], |r| r.get(0))
            .unwrap()
    };
    let (total, alices) = (rows(&mut w.store), created_by(&mut w.store, &alice));
    assert_eq!(
        agent_total(&mut w.store),
        total,
        "the count starts at the rows there are"
    );
    w.store.create_agent(&alice, &card("one"), "count-1").unwrap();
    w.store.create_agent(&alice, &card("two"), "count-2").unwrap();
    w.store.create_agent(&bob, &card("three"), "count-3").unwrap();
    // A replay makes no agent, and neither do refusals.
    assert!(w.store.create_agent(&alice, &card("one"), "count-1").unwrap().replayed);
    w.store.create_agent(&alice, &card("other"), "count-1").unwrap_err();
    w.store.create_agent(&alice, &card("UPPER"), "count-4").unwrap_err();
    assert_eq!(rows(&mut w.store), total + 3);
    assert_eq!(agent_total(&mut w.store), total + 3);
    assert_eq!(created_by(&mut w.store, &alice), alices + 2);
    assert_eq!(created_by(&mut w.store, &bob), 1);
}

#[test]
fn conversations_in_total_at_the_limit_and_one_past_it() {
    let mut w = world();
    let alice = w.alice.clone();
    w.store
        .autocommit()
        .execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO conversations (id, title, state, human_principal, next_seq, created_at, updated_at)
             SELECT 'cv_' || CAST(100000000000000000 + i AS TEXT) || '000000', 't', 'closed', 'someone-else', 1, 0, 0 FROM n",
            [bounds::MAX_CONVERSATIONS as i64 - 1],
        )
        .unwrap();
    w.conversation(&alice, &[]);
    let before = w.bytes();
    let new = NewConversation {
        title: "over".into(),
        agents: vec![],
    };
    let err = w.store.create_conversation(&alice, &new, "over").unwrap_err();
    assert!(
        matches!(
            err,
            Error::LimitReached {
                what: "conversations in total",
                ..
            }
        ),
        "{err}"
    );
    assert!(w.bytes() == before);
}

#[test]
fn idempotency_records_are_kept_for_the_retention_period_and_then_pruned() {
    let mut w = world();
    let alice = w.alice.clone();
    let first = w.store.create_agent(&alice, &card("a"), "key").unwrap().value;
    w.clock
        .advance(bounds::IDEMPOTENCY_RETENTION - Duration::from_micros(1));
    // Within retention: an exact retry replays, a changed one conflicts.
    let again = w.store.create_agent(&alice, &card("a"), "key").unwrap();
    assert!(again.replayed);
    assert_eq!(again.value.id, first.id);
    assert!(matches!(
        w.store.create_agent(&alice, &card("b"), "key"),
        Err(Error::IdempotencyConflict { .. })
    ));
    w.clock.advance(Duration::from_micros(1));
    // Past it: the record is gone and the key starts a new operation.
    let later = w.store.create_agent(&alice, &card("b"), "key").unwrap();
    assert!(!later.replayed && later.state_changed);
    assert_ne!(later.value.id, first.id);
    assert_eq!(w.count("SELECT count(*) FROM communication_idempotency"), 1);
}

/// A wake dispatched through `actor` and accepted by its host: a turn is running.
fn dispatched(w: &mut World, alice: &Caller, actor: &AgentActor, cv: &Conversation) -> DispatchTicket {
    w.post(alice, cv, Acting::Human, "wake up").unwrap();
    let c = w.store.claim_wake(alice, actor, CLAIM).unwrap().unwrap();
    let t = w.store.prepare_dispatch(alice, actor, &c.attempt.id).unwrap();
    w.store
        .finish_dispatch(alice, actor, &c.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    t
}

#[test]
fn at_most_one_unresolved_dispatched_wake_per_agent() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    // At the limit: one dispatched, unresolved wake.
    let t = dispatched(&mut w, &alice, &actor, &cv);
    w.post(&alice, &cv, Acting::Human, "more").unwrap();
    let before = w.bytes();
    let err = w.store.claim_wake(&alice, &actor, CLAIM).unwrap_err();
    assert!(matches!(err, Error::LimitReached { limit: 1, .. }), "{err}");
    assert!(w.bytes() == before, "the refused claim changed the database");
    // Consuming the outstanding wake resolves it; the next one can be claimed.
    w.store
        .consume_wake(&alice, &actor, &t.wake.id, &t.consume_token)
        .unwrap();
    assert!(w.store.claim_wake(&alice, &actor, CLAIM).unwrap().is_some());
}

#[test]
fn attempt_listing_is_bounded() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let c1 = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    w.clock.advance(CLAIM);
    let c2 = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    assert_eq!(c1.wake.id, c2.wake.id);
    let one = w.store.wake_attempts(&alice, &actor, &c1.wake.id, 1).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].id, c1.attempt.id);
    assert_eq!(
        w.store
            .wake_attempts(&alice, &actor, &c1.wake.id, bounds::MAX_PAGE_LIMIT)
            .unwrap()
            .len(),
        2
    );
    for bad in [0, bounds::MAX_PAGE_LIMIT + 1] {
        assert!(matches!(
            w.store.wake_attempts(&alice, &actor, &c1.wake.id, bad),
            Err(Error::InvalidInput { field: "limit", .. })
        ));
    }
}
