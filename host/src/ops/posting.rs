//! The one post path: every surface that commits a message — the MCP tool `post_message`, the
//! console's post form, an agent's own `reply` inside a turn — posts through [`post`], so the
//! agents a post woke are scheduled from the recipients the post itself computed.
//!
//! Nothing here reads the store again or waits on it: the store's `post_message` returns the
//! woken agents ([`Posted::woken`]) and [`Carriers::schedule_woken`] only pushes them on the
//! controller's in-memory queue. [`post`] takes the already-locked store, so a caller runs it
//! where it already holds the lock — a blocking thread (`spawn_blocking`, or a turn's thread),
//! never a tokio worker. A replay woke nobody (its original post did) and schedules nobody.
//!
//! An agent's post also wakes whoever in this process waits for an agent's reply ([`AGENT_POSTED`]:
//! a synchronous `ask_agent`), so a reply made here is seen at its commit, not at the waiter's
//! next look; a reply made on another host is seen at that look.

use ahp_store::Store;
use ahp_store::conversation::{Acting, Caller, ConversationResult, NewMessage, Posted};
use tokio::sync::Notify;

/// Notified after every agent post this process commits: what a waiter for a reply awaits
/// between its reads of the store.
pub static AGENT_POSTED: Notify = Notify::const_new();

use crate::carrier::Carriers;

/// Posts `new` as `caller` (the store's `post_message`), then schedules every agent the post
/// woke that this process carries.
///
/// # Errors
///
/// The store's refusal or failure, as `post_message` returns it; nothing is scheduled then.
pub fn post(
    store: &mut Store,
    carriers: &dyn Carriers,
    caller: &Caller,
    new: &NewMessage,
) -> ConversationResult<Posted> {
    post_consuming(store, carriers, caller, new, &[])
}

/// [`post`] for an agent in a turn: the store's `post_message_consuming`, which also consumes
/// `consumes` (the deliveries the turn consumed and the host held) in the post's commit.
///
/// # Errors
///
/// As [`post`].
pub fn post_consuming(
    store: &mut Store,
    carriers: &dyn Carriers,
    caller: &Caller,
    new: &NewMessage,
    consumes: &[String],
) -> ConversationResult<Posted> {
    let posted = store.post_message_consuming(caller, new, consumes)?;
    carriers.schedule_woken(&posted.woken);
    if matches!(new.acting, Acting::Agent(_)) && !posted.replayed {
        AGENT_POSTED.notify_waiters();
    }
    Ok(posted)
}

#[cfg(test)]
mod tests {
    use ahp_store::conversation::{Acting, IdempotencyKey, NewConversation, OPERATOR_SUBJECT};

    use super::*;
    use crate::carrier::Recorded;

    #[test]
    fn a_post_schedules_whom_it_woke_and_a_replay_or_a_refusal_schedules_nobody() {
        let mut store = Store::open_in_memory().unwrap();
        let op = Caller::full(OPERATOR_SUBJECT).unwrap();
        let card = |h: &str| ahp_store::conversation::AgentCard {
            handle: h.into(),
            display_name: h.into(),
            description: String::new(),
            specialties: Vec::new(),
        };
        let a = store.create_agent(&op, &card("a"), "a").unwrap().value;
        let b = store.create_agent(&op, &card("b"), "b").unwrap().value;
        let cv = store
            .create_conversation(
                &op,
                &NewConversation {
                    title: "t".into(),
                    agents: vec![a.id.clone(), b.id.clone()],
                },
                "cv",
            )
            .unwrap()
            .value;
        let new = NewMessage {
            conversation: cv.id.clone(),
            acting: Acting::Human,
            body: "hi".into(),
            reply_to: None,
            idempotency: IdempotencyKey::Key("k".into()),
        };
        let carriers = Recorded::default();
        let posted = post(&mut store, &carriers, &op, &new).unwrap();
        assert!(posted.state_changed);
        post(&mut store, &carriers, &op, &new).unwrap();
        let mut closed = new.clone();
        closed.conversation = "cv_missing".into();
        assert!(post(&mut store, &carriers, &op, &closed).is_err());
        assert_eq!(
            *carriers.0.lock().unwrap(),
            vec![vec![a.id, b.id], vec![]],
            "the post scheduled both agents, its replay nobody, the refusal was not scheduled"
        );
    }
}
