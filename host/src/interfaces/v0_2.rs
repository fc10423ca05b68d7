//! `ahp:agent@0.2.0`: the frozen interfaces of the contract before the model gateway and MCP
//! tools, for components built for it. Each function forwards to its `@0.3.0` twin
//! ([`snapshot`], [`credentials`], [`checkpoint`] through `frozen`, [`conversations`] here;
//! `metering` links every version itself), converting only the generated types, so the
//! versions cannot drift apart. A 0.2.0 wake has no origin: what the 0.3.0 wake adds is
//! dropped.
//!
//! [`snapshot`]: super::snapshot
//! [`credentials`]: super::credentials
//! [`checkpoint`]: super::checkpoint
//! [`conversations`]: super::conversations

use super::AgentCtx;
use super::bindings::v0_2::ahp::agent as old;
use super::bindings::v0_3::ahp::agent as new;

super::frozen::forward_unchanged_interfaces!();

impl old::conversations::Host for AgentCtx {
    fn current_wake(&mut self) -> Option<old::conversations::Wake> {
        new::conversations::Host::current_wake(self).map(|w| old::conversations::Wake {
            id: w.id,
            agent_id: w.agent_id,
            queued: w.queued,
        })
    }

    fn inbox(
        &mut self,
        after: u64,
        limit: u32,
        queued_only: bool,
    ) -> Result<Vec<old::conversations::Delivery>, old::conversations::Error> {
        new::conversations::Host::inbox(self, after, limit, queued_only)
            .map(|page| {
                page.into_iter()
                    .map(|d| old::conversations::Delivery {
                        order: d.order,
                        consumed: d.consumed,
                        message: message(d.message),
                    })
                    .collect()
            })
            .map_err(conversation_error)
    }

    fn transcript(
        &mut self,
        conversation_id: String,
        after: u64,
        limit: u32,
    ) -> Result<Vec<old::conversations::Message>, old::conversations::Error> {
        new::conversations::Host::transcript(self, conversation_id, after, limit)
            .map(|page| page.into_iter().map(message).collect())
            .map_err(conversation_error)
    }

    fn reply(
        &mut self,
        conversation_id: String,
        reply_to: Option<String>,
        body: String,
    ) -> Result<old::conversations::Message, old::conversations::Error> {
        new::conversations::Host::reply(self, conversation_id, reply_to, body)
            .map(message)
            .map_err(conversation_error)
    }

    fn consume(&mut self, message_id: String) -> Result<(), old::conversations::Error> {
        new::conversations::Host::consume(self, message_id).map_err(conversation_error)
    }
}

fn message(m: new::conversations::Message) -> old::conversations::Message {
    old::conversations::Message {
        id: m.id,
        conversation_id: m.conversation_id,
        seq: m.seq,
        author: match m.author {
            new::conversations::Author::Human => old::conversations::Author::Human,
            new::conversations::Author::Agent(id) => old::conversations::Author::Agent(id),
        },
        body: m.body,
        reply_to: m.reply_to,
        created_at_micros: m.created_at_micros,
    }
}

fn conversation_error(e: new::conversations::Error) -> old::conversations::Error {
    use new::conversations::Error as E;
    use old::conversations::Error as O;
    match e {
        E::NoWake => O::NoWake,
        E::LimitTooLarge(n) => O::LimitTooLarge(n),
        E::NotFound => O::NotFound,
        E::Invalid(m) => O::Invalid(m),
        E::TooManyReplies(n) => O::TooManyReplies(n),
        E::Refused(m) => O::Refused(m),
        E::Unavailable(m) => O::Unavailable(m),
    }
}
