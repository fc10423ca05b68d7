//! Cursors in commit order (migration 0013): a reader tailing an inbox or an agent's audit
//! events never passes a row that commits after it read. The trap is PostgreSQL's: a sequence
//! value taken early can commit late. Each test holds a write transaction open after it took
//! its place in the stream, lets a second writer of the same stream try to append (and, under
//! a sequence, commit first), reads, and only then commits the first: tailing from the cursor
//! must end with everything a full read finds. On SQLite the first transaction holds the write
//! lock, so the second simply waits; the tests run on both backends.

use std::thread;

use ahp_store_sql::Begin;

use super::*;
use crate::conversation::{audit, delivery};
use crate::testing::TestDb;

/// Long enough for the second writer to reach its insert (and, under a sequence, commit).
const HOLD: Duration = Duration::from_millis(300);

/// Runs `post` until it is not refused as transient: what a client does with a busy store.
fn post_through_contention(store: &mut Store, caller: &Caller, post: &NewMessage) -> TranscriptMessage {
    loop {
        match store.post_message(caller, post) {
            Err(e) if e.is_transient() => thread::sleep(Duration::from_millis(5)),
            other => return other.unwrap().value,
        }
    }
}

#[test]
fn a_delivery_that_commits_late_is_not_passed_by_the_inbox_cursor() {
    let db = TestDb::new();
    let mut w = world_over(db.open().unwrap());
    let alice = w.alice.clone();
    let b = w.agent(&alice);
    let c = w.agent(&alice);
    let actor = w.attach(&alice, &b);
    let with_b = w.conversation(&alice, &[&b]);
    let without_b = w.conversation(&alice, &[&c]);
    w.post(&alice, &with_b, Acting::Human, "first").unwrap();
    // A message not yet delivered to B, which the late transaction delivers to it.
    let late_message = w.post(&alice, &without_b, Acting::Human, "late").unwrap();

    let mut late = db.open().unwrap();
    let mut poster = db.open().unwrap().with_clock(Arc::new(w.clock.clone()));

    // The late writer takes its place in B's inbox first and holds its transaction open.
    let (tx, now) = late.begin(Begin::Write).unwrap();
    let late_order = delivery::queue(&tx, &late_message.id, &b.id, now).unwrap();

    // A second post to B, from another connection, while the late one is open.
    let post = w.new_post(&with_b, Acting::Human, "second");
    let caller = alice.clone();
    let second = thread::spawn(move || post_through_contention(&mut poster, &caller, &post));
    thread::sleep(HOLD);

    // The reader tails B's inbox: once now, once after the late transaction committed.
    let mut seen = Vec::new();
    let mut cursor = 0;
    let mut tail = |store: &mut Store, seen: &mut Vec<(u64, String)>| {
        for d in store.read_inbox(&alice, &actor, cursor, 50, false).unwrap() {
            cursor = d.delivery_order;
            seen.push((d.delivery_order, d.message.id));
        }
    };
    tail(&mut w.store, &mut seen);
    tx.commit().unwrap();
    let second = second.join().unwrap();
    tail(&mut w.store, &mut seen);

    let everything: Vec<(u64, String)> = w
        .store
        .read_inbox(&alice, &actor, 0, 50, false)
        .unwrap()
        .into_iter()
        .map(|d| (d.delivery_order, d.message.id))
        .collect();
    assert_eq!(everything.len(), 3, "{everything:?}");
    assert_eq!(
        seen, everything,
        "tailing the inbox passed a delivery that committed late"
    );
    // The second post waited for the late one: its order is the later one.
    let second_order = everything.iter().find(|(_, m)| *m == second.id).unwrap().0;
    assert_eq!((late_order, second_order), (2, 3));
}

#[test]
fn an_event_that_commits_late_is_not_passed_by_the_agents_audit_cursor() {
    let db = TestDb::new();
    let mut w = world_over(db.open().unwrap());
    let alice = w.alice.clone();
    let b = w.agent(&alice);
    let cv = w.conversation(&alice, &[&b]);

    let mut late = db.open().unwrap();
    let mut poster = db.open().unwrap().with_clock(Arc::new(w.clock.clone()));

    // The late writer appends an event of B's and holds its transaction open.
    let (tx, now) = late.begin(Begin::Write).unwrap();
    audit::record(
        &tx,
        audit::AuditKind::AgentUpdated,
        Some(&b.id),
        None,
        serde_json::json!({}),
        now,
    )
    .unwrap();

    // A post to B from another connection appends B's next events meanwhile.
    let post = w.new_post(&cv, Acting::Human, "hello");
    let caller = alice.clone();
    let second = thread::spawn(move || post_through_contention(&mut poster, &caller, &post));
    thread::sleep(HOLD);

    let mut seen = Vec::new();
    let mut cursor = 0;
    let mut tail = |store: &mut Store, seen: &mut Vec<i64>| {
        for e in store.communication_events(cursor, Some(&b.id), None, 50).unwrap() {
            cursor = e.id;
            seen.push(e.id);
        }
    };
    tail(&mut w.store, &mut seen);
    tx.commit().unwrap();
    second.join().unwrap();
    tail(&mut w.store, &mut seen);

    let everything: Vec<i64> = w
        .store
        .communication_events(0, Some(&b.id), None, 50)
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    // agent_created, wake_created by the post, and the late agent_updated.
    assert_eq!(everything.len(), 3, "{everything:?}");
    assert_eq!(
        seen, everything,
        "tailing the agent's events passed one that committed late"
    );
}

#[test]
fn an_audit_cursor_from_another_stream_is_refused() {
    let mut w = world();
    let alice = w.alice.clone();
    let b = w.agent(&alice);
    let c = w.agent(&alice);
    let of_c = w.store.communication_events(0, Some(&c.id), None, 50).unwrap();
    let before = w.bytes();
    let err = w
        .store
        .communication_events(of_c[0].id, Some(&b.id), None, 50)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { field: "after_id", .. }), "{err}");
    assert_eq!(w.bytes(), before);
    // The agent's own event is a cursor into its stream: nothing after its creation.
    let of_b = w.store.communication_events(0, Some(&b.id), None, 50).unwrap();
    assert!(
        w.store
            .communication_events(of_b[0].id, Some(&b.id), None, 50)
            .unwrap()
            .is_empty()
    );
}

/// Rows as a build of schema 11 left them: the inbox orders came from one table-wide
/// sequence (so each inbox's orders have gaps), and the logs had only their ids.
const SCHEMA_11_ROWS: &str = "
INSERT INTO agents (id, owner_principal, handle, display_name, description, specialties,
                    profile_revision, controller_generation, created_at, updated_at)
VALUES ('agt_a', 'p', 'a', 'A', '', '[]', 1, 0, 1, 1), ('agt_b', 'p', 'b', 'B', '', '[]', 1, 0, 1, 1);
INSERT INTO conversations (id, title, state, human_principal, next_seq, created_at, updated_at)
VALUES ('cv_1', 't', 'open', 'p', 4, 1, 1);
INSERT INTO messages (id, conversation_id, seq, author_kind, author_principal, body, created_at)
VALUES ('msg_1', 'cv_1', 1, 'human', 'p', 'x', 1), ('msg_2', 'cv_1', 2, 'human', 'p', 'x', 2),
       ('msg_3', 'cv_1', 3, 'human', 'p', 'x', 3);
INSERT INTO deliveries (delivery_order, message_id, recipient_agent_id, state, created_at)
VALUES (1, 'msg_1', 'agt_a', 'queued', 1), (2, 'msg_1', 'agt_b', 'queued', 1),
       (3, 'msg_2', 'agt_a', 'consumed', 2), (4, 'msg_3', 'agt_a', 'queued', 3),
       (5, 'msg_3', 'agt_b', 'queued', 3);
INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count,
                       tool_state, mcp_config, checksum, created_at, updated_at)
VALUES ('tr_1', 'staged', 'h', '', '[]', 0, '{}', '[]', 'c', 1, 1),
       ('tr_2', 'staged', 'h', '', '[]', 0, '{}', '[]', 'c', 1, 1);
INSERT INTO usage_events (id, transfer_id, type, at, detail)
VALUES (10, 'tr_1', 'snapshot_created', 1, '{}'), (11, 'tr_2', 'snapshot_created', 1, '{}'),
       (12, 'tr_1', 'terminated', 2, '{}');
INSERT INTO communication_events (id, at, kind, agent_id, conversation_id, detail)
VALUES (20, 1, 'agent_created', 'agt_a', NULL, '{}'), (21, 1, 'agent_created', 'agt_b', NULL, '{}'),
       (22, 1, 'conversation_created', NULL, 'cv_1', '{}'), (23, 2, 'wake_created', 'agt_a', 'cv_1', '{}');
";

#[test]
fn an_upgraded_database_keeps_every_inbox_order_and_numbers_the_logs_in_id_order() {
    let db = TestDb::new();
    let mut conn: Box<dyn ahp_store_sql::Connection> = match &db {
        TestDb::Sqlite(dir) => {
            let raw = rusqlite::Connection::open(dir.path().join("ahp.db")).unwrap();
            for sql in &crate::migrations::SQLITE[..11] {
                raw.execute_batch(sql).unwrap();
            }
            raw.pragma_update(None, "user_version", 11).unwrap();
            Box::new(crate::sqlite::SqliteConnection::new(raw))
        }
        TestDb::Postgres(url, _) => {
            let mut pg = ahp_store_postgres::PgConnection::connect(url).unwrap();
            ahp_store_postgres::migrate_to(&mut pg, 11).unwrap();
            Box::new(pg)
        }
    };
    ahp_store_sql::Tx::new(conn.as_mut())
        .execute_batch(SCHEMA_11_ROWS)
        .unwrap();
    if conn.dialect() == ahp_store_sql::Dialect::Postgres {
        ahp_store_postgres::migrate(conn.as_mut()).unwrap();
    }
    let mut store = world_over(Store::over(conn).unwrap()).store;
    let column = |store: &mut Store, sql: &str| -> Vec<(String, i64)> {
        let tx = store.autocommit();
        let mut stmt = tx.prepare(sql).unwrap();
        stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(std::result::Result::unwrap)
            .collect()
    };
    // Every delivery keeps its order: a cursor a client held, and a wake's marks, still hold.
    assert_eq!(
        column(
            &mut store,
            "SELECT recipient_agent_id || '/' || message_id, delivery_order FROM deliveries ORDER BY 1"
        ),
        [
            ("agt_a/msg_1", 1),
            ("agt_a/msg_2", 3),
            ("agt_a/msg_3", 4),
            ("agt_b/msg_1", 2),
            ("agt_b/msg_3", 5)
        ]
        .map(|(k, v)| (k.to_owned(), v))
    );
    // Each log is numbered per parent in the order of its ids.
    assert_eq!(
        column(
            &mut store,
            "SELECT transfer_id || '/' || CAST(id AS TEXT), seq FROM usage_events ORDER BY id"
        ),
        [("tr_1/10", 1), ("tr_2/11", 1), ("tr_1/12", 2)].map(|(k, v)| (k.to_owned(), v))
    );
    assert_eq!(
        column(
            &mut store,
            "SELECT CAST(id AS TEXT), coalesce(agent_seq, 0) * 10 + coalesce(conversation_seq, 0)
             FROM communication_events ORDER BY id"
        ),
        [("20", 10), ("21", 10), ("22", 1), ("23", 22)].map(|(k, v)| (k.to_owned(), v))
    );
    // The next of each continues after the largest: the inbox after its last order.
    let tx = store.begin(Begin::Write).unwrap().0;
    assert_eq!(
        delivery::queue(&tx, "msg_2", "agt_b", Timestamp::from_micros(4)).unwrap(),
        6
    );
    crate::event::append(
        &tx,
        "tr_1",
        crate::EventKind::Terminated,
        Timestamp::from_micros(4),
        serde_json::json!({}),
    )
    .unwrap();
    audit::record(
        &tx,
        audit::AuditKind::AgentUpdated,
        Some("agt_a"),
        Some("cv_1"),
        serde_json::json!({}),
        Timestamp::from_micros(4),
    )
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(
        column(
            &mut store,
            "SELECT transfer_id, max(seq) FROM usage_events GROUP BY transfer_id ORDER BY 1"
        ),
        [("tr_1", 3), ("tr_2", 1)].map(|(k, v)| (k.to_owned(), v))
    );
    assert_eq!(
        column(
            &mut store,
            "SELECT kind, agent_seq * 10 + conversation_seq FROM communication_events WHERE kind = 'agent_updated'"
        ),
        [("agent_updated".to_owned(), 33)]
    );
}
