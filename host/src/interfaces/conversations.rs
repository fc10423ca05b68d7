//! `ahp:agent/conversations`: the agent's inbox, its conversations' transcripts, its replies
//! and delivery consume, during a conversation turn.
//!
//! Every call acts for the transfer's owner as the agent, through the exact endpoint and
//! controller generation whose carrier the host holds ([`TurnCtx`]): the store's endpoint
//! admission, participation checks and bounds apply as they do to any other caller. A reply's
//! identity is the turn's wake id and its index among the turn's replies
//! ([`IdempotencyKey::WakeReply`]): the same wake's turn, run again, resolves to the messages
//! already posted. A reply is posted through [`crate::ops::posting`], which schedules the agents it
//! woke at once; the store consumes the delivery it answers in the reply's own commit. A consume
//! is checked at once but held ([`AgentCtx::consumed`]) and recorded with the turn's next reply
//! or its end, whichever commits first; the turn's own inbox reads see it consumed. So once a
//! reply is posted, nothing it answered or the turn consumed before it is ever queued again,
//! whatever crashes when. The queued deliveries the turn's reads return are remembered
//! (`AgentCtx::read`): those still queued at its end count one more try, which `tries`
//! reports. Reads ([`MAX_READS_PER_TURN`]) and consumes ([`MAX_CONSUMES_PER_TURN`]) are counted
//! per turn. Outside a turn (`resume`) every call but `current-wake` is refused with
//! `no-wake`.

use ahp_store::conversation::bounds::{MAX_MESSAGE_BODY_BYTES, MAX_PAGE_LIMIT, MAX_WAKE_REPLY_OPERATIONS};
use ahp_store::conversation::{
    Acting, Author as StoreAuthor, ConversationError as StoreError, IdempotencyKey, NewMessage, TranscriptMessage,
};

use super::bindings::v0_3::ahp::agent::conversations::{Author, Delivery, Error, Host, Message, Wake, WakeOrigin};
use super::context::{AgentCtx, MAX_CONSUMES_PER_TURN, MAX_READS_PER_TURN, TurnCtx};
use crate::carrier::{Carriers, NoCarriers};
use crate::ops::Ops;

/// Largest page one `inbox` or `transcript` call returns.
pub const MAX_PAGE: u32 = 64;

impl Host for AgentCtx {
    fn current_wake(&mut self) -> Option<Wake> {
        self.turn.as_ref().map(|t| Wake {
            id: t.wake.id.clone(),
            agent_id: t.actor.agent.clone(),
            queued: t.queued,
            origin: (&t.wake.origin).into(),
        })
    }

    fn inbox(&mut self, after: u64, limit: u32, queued_only: bool) -> Result<Vec<Delivery>, Error> {
        let turn = self.read_turn(limit)?;
        let limit = limit as usize;
        // The turn's held consumes are consumed in its view: shown consumed, or skipped with
        // `queued-only`. Skipped ones would leave the page short, so each read asks for as
        // many more as the turn holds (within the store's page bound) and reads on until the
        // page is full or the inbox ends: with at most 256 held, three reads at most.
        let fetch = if limit == 0 || !queued_only {
            limit
        } else {
            (limit + self.consumed.len()).min(MAX_PAGE_LIMIT)
        };
        let mut page = Vec::with_capacity(limit);
        let mut cursor = after;
        loop {
            let read = self
                .db(|db| db.read_inbox(&turn.caller, &turn.actor, cursor, fetch, queued_only))
                .map_err(refusal)?;
            let ended = read.len() < fetch;
            for d in read {
                cursor = d.delivery_order;
                let held = self.consumed.contains(&d.message.id);
                if held && queued_only {
                    continue;
                }
                if d.consumed_at.is_none() && !held {
                    self.remember_read(&d.message.id, d.tries);
                }
                page.push(Delivery {
                    order: d.delivery_order,
                    consumed: held || d.consumed_at.is_some(),
                    message: d.message.into(),
                });
                if page.len() == limit {
                    return Ok(page);
                }
            }
            if ended || limit == 0 {
                return Ok(page);
            }
        }
    }

    fn transcript(&mut self, conversation_id: String, after: u64, limit: u32) -> Result<Vec<Message>, Error> {
        let turn = self.read_turn(limit)?;
        let acting = Acting::Agent(turn.actor.clone());
        let messages = self
            .db(|db| db.read_transcript(&turn.caller, &acting, &conversation_id, after, limit as usize))
            .map_err(refusal)?;
        Ok(messages.into_iter().map(Into::into).collect())
    }

    fn reply(&mut self, conversation_id: String, reply_to: Option<String>, body: String) -> Result<Message, Error> {
        let turn = self.turn.as_mut().ok_or(Error::NoWake)?;
        if turn.replies >= MAX_WAKE_REPLY_OPERATIONS {
            return Err(Error::TooManyReplies(MAX_WAKE_REPLY_OPERATIONS));
        }
        if body.is_empty() || body.len() > MAX_MESSAGE_BODY_BYTES {
            return Err(Error::Invalid(format!(
                "a reply's body must be 1 to {MAX_MESSAGE_BODY_BYTES} bytes, not {}",
                body.len()
            )));
        }
        let new = NewMessage {
            conversation: conversation_id,
            acting: Acting::Agent(turn.actor.clone()),
            body,
            reply_to,
            idempotency: IdempotencyKey::WakeReply {
                wake: turn.wake.id.clone(),
                index: turn.replies,
            },
        };
        // The index is spent whatever the outcome: a refused reply is an intentional operation
        // too, and a retried turn makes the same calls in the same order.
        turn.replies += 1;
        let caller = turn.caller.clone();
        // The one post path: the agents this reply woke are scheduled at once, not on the tick.
        let carriers = self.carriers.upgrade();
        let carriers: &dyn Carriers = carriers.as_deref().unwrap_or(&NoCarriers);
        // The consumes held so far go with the reply: once it is posted, no later turn answers
        // what this one handled before it. A replay recorded nothing: they stay held.
        let held = &self.consumed;
        let posted = self
            .db(|db| {
                Ops::new(db, carriers)
                    .conversations()
                    .post_consuming(&caller, &new, held)
            })
            .map_err(refusal)?;
        if posted.state_changed {
            self.consumed.clear();
        }
        Ok(posted.value.into())
    }

    fn tries(&mut self, message_id: String) -> Result<u32, Error> {
        if let Some((_, tries)) = self.read.iter().find(|(id, _)| *id == message_id) {
            self.turn.as_ref().ok_or(Error::NoWake)?;
            return Ok(*tries);
        }
        let turn = self.read_turn(0)?;
        let delivery = self
            .db(|db| db.read_delivery(&turn.caller, &turn.actor, &message_id))
            .map_err(refusal)?;
        Ok(delivery.tries)
    }

    fn consume(&mut self, message_id: String) -> Result<(), Error> {
        let turn = self.turn.as_ref().ok_or(Error::NoWake)?.clone();
        self.calls.consumes += 1;
        if self.calls.consumes > MAX_CONSUMES_PER_TURN {
            return Err(Error::Refused(format!(
                "more than {MAX_CONSUMES_PER_TURN} consumes in one turn"
            )));
        }
        if self.consumed.contains(&message_id) {
            return Ok(());
        }
        // Checked now (a message not delivered to this agent is refused at once), recorded with
        // the turn's end: a read here, no commit.
        let delivery = self
            .db(|db| db.read_delivery(&turn.caller, &turn.actor, &message_id))
            .map_err(refusal)?;
        if delivery.consumed_at.is_none() {
            self.consumed.push(message_id);
        }
        Ok(())
    }
}

impl AgentCtx {
    /// Remembers a queued delivery this turn read, once, within the bound the turn's end takes.
    fn remember_read(&mut self, message_id: &str, tries: u32) {
        if self.read.len() < MAX_CONSUMES_PER_TURN as usize && !self.read.iter().any(|(id, _)| id == message_id) {
            self.read.push((message_id.to_owned(), tries));
        }
    }

    /// The turn, for a bounded read of at most `limit`.
    fn read_turn(&mut self, limit: u32) -> Result<TurnCtx, Error> {
        let turn = self.turn.as_ref().ok_or(Error::NoWake)?.clone();
        if limit > MAX_PAGE {
            return Err(Error::LimitTooLarge(MAX_PAGE));
        }
        self.calls.reads += 1;
        if self.calls.reads > MAX_READS_PER_TURN {
            return Err(Error::Refused(format!(
                "more than {MAX_READS_PER_TURN} reads in one turn"
            )));
        }
        Ok(turn)
    }
}

impl From<TranscriptMessage> for Message {
    fn from(m: TranscriptMessage) -> Self {
        Self {
            id: m.id,
            conversation_id: m.conversation_id,
            seq: m.seq,
            author: match m.author {
                StoreAuthor::Human => Author::Human,
                StoreAuthor::Agent { agent_id, .. } => Author::Agent(agent_id),
            },
            body: m.body,
            reply_to: m.reply_to,
            created_at_micros: u64::try_from(m.created_at.as_micros()).unwrap_or(0),
        }
    }
}

/// The WIT form of a wake's first cause.
impl From<&ahp_store::conversation::WakeOrigin> for WakeOrigin {
    fn from(o: &ahp_store::conversation::WakeOrigin) -> Self {
        use ahp_store::conversation::WakeOrigin as W;
        match o {
            W::Message => Self::Message,
            W::AgentTaskAttempt(task) => Self::AgentTaskAttempt(task.clone()),
            W::AttentionEvent(event) => Self::AttentionEvent(event.clone()),
            W::Wait(wait) => Self::Wait(wait.clone()),
        }
    }
}

/// The interface's error for a store refusal. Existence-hiding carries through: whatever the
/// store does not show this agent is `not-found`.
fn refusal(e: StoreError) -> Error {
    match e {
        StoreError::InvalidInput { field, reason } => Error::Invalid(format!("{field}: {reason}")),
        StoreError::ConversationNotFound(_) | StoreError::MessageNotFound(_) | StoreError::AgentNotFound(_) => {
            Error::NotFound
        }
        StoreError::Database(e) => Error::Unavailable(e.to_string()),
        StoreError::CorruptRow { .. } => Error::Unavailable(e.to_string()),
        other => Error::Refused(other.to_string()),
    }
}
