//! `ahp:agent@0.2.0`: the frozen interfaces of the contract before the model gateway and MCP
//! tools, for components built for it. Each function forwards to its `@0.3.0` twin
//! ([`snapshot`], [`credentials`], [`checkpoint`], [`conversations`]; `metering` links every
//! version itself), converting only the generated types, so the versions cannot drift apart.
//! A 0.2.0 wake has no origin: what the 0.3.0 wake adds is dropped.
//!
//! [`snapshot`]: super::snapshot
//! [`credentials`]: super::credentials
//! [`checkpoint`]: super::checkpoint
//! [`conversations`]: super::conversations

use super::AgentCtx;
use super::bindings::v0_2::ahp::agent as old;
use super::bindings::v0_3::ahp::agent as new;

impl old::snapshot::Host for AgentCtx {
    fn transfer_id(&mut self) -> String {
        new::snapshot::Host::transfer_id(self)
    }

    fn system_prompt(&mut self) -> String {
        new::snapshot::Host::system_prompt(self)
    }

    fn message_count(&mut self) -> u32 {
        new::snapshot::Host::message_count(self)
    }

    fn messages(&mut self, after: u32, limit: u32) -> Result<Vec<old::snapshot::Message>, old::snapshot::Error> {
        match new::snapshot::Host::messages(self, after, limit) {
            Ok(page) => Ok(page
                .into_iter()
                .map(|m| old::snapshot::Message {
                    role: m.role,
                    content: m.content,
                })
                .collect()),
            Err(new::snapshot::Error::LimitTooLarge(n)) => Err(old::snapshot::Error::LimitTooLarge(n)),
        }
    }

    fn tool_state(&mut self) -> String {
        new::snapshot::Host::tool_state(self)
    }

    fn mcp_servers(&mut self) -> Vec<old::snapshot::McpServer> {
        new::snapshot::Host::mcp_servers(self)
            .into_iter()
            .map(|s| old::snapshot::McpServer {
                server: s.server,
                cred_ref: s.cred_ref,
            })
            .collect()
    }
}

impl old::credentials::Host for AgentCtx {
    fn resolve(&mut self, cred_ref: String) -> Result<old::credentials::Credential, old::credentials::Error> {
        use new::credentials::Error as E;
        match new::credentials::Host::resolve(self, cred_ref) {
            Ok(c) => Ok(old::credentials::Credential {
                cred_ref: c.cred_ref,
                value: c.value,
            }),
            Err(E::NotAllowed(m)) => Err(old::credentials::Error::NotAllowed(m)),
            Err(E::NotFound) => Err(old::credentials::Error::NotFound),
            Err(E::Unavailable(m)) => Err(old::credentials::Error::Unavailable(m)),
        }
    }
}

impl old::checkpoint::Host for AgentCtx {
    fn save(&mut self, state: Vec<u8>) -> Result<(), old::checkpoint::Error> {
        new::checkpoint::Host::save(self, state).map_err(checkpoint_error)
    }

    fn load(&mut self) -> Result<Option<Vec<u8>>, old::checkpoint::Error> {
        new::checkpoint::Host::load(self).map_err(checkpoint_error)
    }
}

fn checkpoint_error(e: new::checkpoint::Error) -> old::checkpoint::Error {
    match e {
        new::checkpoint::Error::TooLarge(n) => old::checkpoint::Error::TooLarge(n),
        new::checkpoint::Error::Unavailable(m) => old::checkpoint::Error::Unavailable(m),
    }
}

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
