//! Sixteen writers on separate connections posting into one conversation, on either backend
//! (`AHP_TEST_BACKEND=postgres`: sixteen PostgreSQL sessions, whose serializable transactions
//! conflict where SQLite's write lock queues them).

use std::sync::Arc;
use std::thread;

use super::*;
use crate::testing::TestDb;

const THREADS: usize = 16;
const POSTS_PER_THREAD: usize = 15;

#[test]
fn sixteen_connections_posting_keep_seqs_contiguous_and_deliveries_exact() {
    // The agents have no wake yet: the first posts race to create each agent's one open wake.
    let db = Arc::new(TestDb::new());
    let alice = Caller::full("account:alice").unwrap();
    let (agents, cv) = {
        let mut store = db.open().unwrap();
        let agents: Vec<Agent> = (0..3)
            .map(|i| {
                store
                    .create_agent(&alice, &card("a"), &format!("agent-{i}"))
                    .unwrap()
                    .value
            })
            .collect();
        let new = NewConversation {
            title: "busy".into(),
            agents: agents.iter().map(|a| a.id.clone()).collect(),
        };
        let cv = store.create_conversation(&alice, &new, "cv").unwrap().value;
        (agents, cv)
    };
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, alice, cv) = (db.clone(), alice.clone(), cv.clone());
            thread::spawn(move || {
                let mut store = db.open().unwrap();
                let mut seqs = Vec::new();
                for i in 0..POSTS_PER_THREAD {
                    let post = NewMessage {
                        conversation: cv.id.clone(),
                        acting: Acting::Human,
                        body: format!("thread {t} post {i}"),
                        reply_to: None,
                        idempotency: IdempotencyKey::Key(format!("t{t}-p{i}")),
                    };
                    // A writer that waited past busy_timeout (or lost a serialization conflict
                    // every time) retries with the same key: the retry is either the first
                    // commit or an exact replay, never a duplicate.
                    let m = loop {
                        match store.post_message(&alice, &post) {
                            Ok(m) => break m,
                            Err(e) if e.is_transient() => {}
                            Err(e) => panic!("post failed: {e}"),
                        }
                    };
                    seqs.push(m.value.seq);
                }
                seqs
            })
        })
        .collect();
    let mut seqs: Vec<u64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    seqs.sort_unstable();
    let total = (THREADS * POSTS_PER_THREAD) as u64;
    assert_eq!(
        seqs,
        (1..=total).collect::<Vec<_>>(),
        "every post got its own seq, no gaps"
    );

    let mut store = db.open().unwrap();
    let conn = store.autocommit();
    let stored: Vec<i64> = conn
        .prepare("SELECT seq FROM messages ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(stored, (1..=total as i64).collect::<Vec<_>>());
    for a in &agents {
        let (n, distinct): (i64, i64) = conn
            .query_row(
                "SELECT count(*), count(DISTINCT message_id) FROM deliveries WHERE recipient_agent_id = ?1",
                [&a.id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            (n, distinct),
            (total as i64, total as i64),
            "each delivery present once"
        );
        let (wakes, count): (i64, i64) = conn
            .query_row(
                "SELECT count(*), sum(delivery_count) FROM wakes WHERE agent_id = ?1",
                [&a.id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((wakes, count), (1, total as i64), "one coalesced wake per agent");
    }
    let next: i64 = conn
        .query_row("SELECT next_seq FROM conversations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(next, total as i64 + 1);
}

#[test]
fn posts_in_separate_conversations_racing_for_an_agents_first_wake_all_commit_into_one_wake() {
    const WRITERS: usize = 8;
    // No agent has a wake yet, and each writer posts into a conversation of its own: the first
    // posts race only to create each agent's one open wake.
    let db = Arc::new(TestDb::new());
    let alice = Caller::full("account:alice").unwrap();
    let (agents, conversations) = {
        let mut store = db.open().unwrap();
        let agents: Vec<Agent> = (0..3)
            .map(|i| {
                store
                    .create_agent(&alice, &card("a"), &format!("agent-{i}"))
                    .unwrap()
                    .value
            })
            .collect();
        let conversations: Vec<Conversation> = (0..WRITERS)
            .map(|w| {
                let new = NewConversation {
                    title: format!("writer {w}"),
                    agents: agents.iter().map(|a| a.id.clone()).collect(),
                };
                store
                    .create_conversation(&alice, &new, &format!("cv-{w}"))
                    .unwrap()
                    .value
            })
            .collect();
        (agents, conversations)
    };
    let start = Arc::new(std::sync::Barrier::new(WRITERS));
    let handles: Vec<_> = conversations
        .into_iter()
        .enumerate()
        .map(|(w, cv)| {
            let (db, alice, start) = (db.clone(), alice.clone(), start.clone());
            thread::spawn(move || {
                let mut store = db.open().unwrap();
                let post = NewMessage {
                    conversation: cv.id.clone(),
                    acting: Acting::Human,
                    body: "first".into(),
                    reply_to: None,
                    idempotency: IdempotencyKey::Key(format!("first-{w}")),
                };
                start.wait();
                loop {
                    match store.post_message(&alice, &post) {
                        Ok(m) => break m.value.seq,
                        Err(e) if e.is_transient() => {}
                        Err(e) => panic!("post failed: {e}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 1);
    }
    let mut store = db.open().unwrap();
    let conn = store.autocommit();
    for a in &agents {
        let (wakes, count): (i64, i64) = conn
            .query_row(
                "SELECT count(*), sum(delivery_count) FROM wakes WHERE agent_id = ?1",
                [&a.id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            (wakes, count),
            (1, WRITERS as i64),
            "one wake per agent, every delivery in it"
        );
    }
}
