//! A no-op consume (already consumed, not delivered) answers from a read: it never takes the
//! database's write lock, so a guest consuming in a loop costs no writes and waits on none.
//! On PostgreSQL, which has no database-wide write lock, the other connection holds the row
//! locks of every delivery instead, and a write that needs one waits at most `lock_timeout`.

use ahp_store_sql::{Begin, Dialect};

use super::*;
use crate::testing::TestDb;

#[test]
fn a_no_op_consume_never_takes_the_write_lock() {
    let db = TestDb::new();
    let alice = Caller::full("account:alice").unwrap();
    // Without the write lock a busy attempt fails at once instead of waiting.
    let mut store = db.open().unwrap().with_busy_timeout(Duration::ZERO).unwrap();
    if store.dialect() == Dialect::Postgres {
        store.autocommit().execute_batch("SET lock_timeout = '10ms'").unwrap();
    }
    let mut other = db.open().unwrap();
    let agent = store.create_agent(&alice, &card("a"), "agent").unwrap().value;
    let new = NewConversation {
        title: "t".into(),
        agents: vec![agent.id.clone()],
    };
    let cv = store.create_conversation(&alice, &new, "cv").unwrap().value;
    let ep = store.attach_endpoint(&alice, &agent.id, LEASE, "attach").unwrap().value;
    let actor = AgentActor::of(&ep);
    let post = |store: &mut Store, key: &str| {
        let new = NewMessage {
            conversation: cv.id.clone(),
            acting: Acting::Human,
            body: "hello".into(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(key.into()),
        };
        store.post_message(&alice, &new).unwrap().value.id
    };
    let (done, queued) = (post(&mut store, "one"), post(&mut store, "two"));
    assert!(store.consume_delivery(&alice, &actor, &done).unwrap().state_changed);

    // Another connection holds the write lock (and every delivery's row lock).
    let (held, _) = other.begin(Begin::Write).unwrap();
    held.execute("UPDATE deliveries SET state = state", ()).unwrap();

    let again = store.consume_delivery(&alice, &actor, &done).unwrap();
    assert!(!again.state_changed && !again.replayed);
    assert_eq!(again.value.state, DeliveryState::Consumed);
    assert!(matches!(
        store.consume_delivery(&alice, &actor, &crate::id::new_id(MESSAGE_ID_PREFIX)),
        Err(Error::MessageNotFound(_))
    ));
    // A consume that has something to do does need the lock (so the two above did not take it).
    assert!(matches!(
        store.consume_delivery(&alice, &actor, &queued),
        Err(e) if e.is_transient()
    ));
    held.commit().unwrap();
    assert!(store.consume_delivery(&alice, &actor, &queued).unwrap().state_changed);
}
