//! The conversation operations an agent or a person acts through — reading a conversation,
//! posting, the inbox, consuming a delivery or a wake, an agent's bootstrap — as every surface
//! runs them (see [the module above](super)): the MCP conversation tools
//! (`mcp/conversation_tools.rs`) and the console. The operations without an acting agent
//! (creating an agent, a conversation, attaching an endpoint) are one store call each, made by
//! the surface itself.

use ahp_store::Store;
use ahp_store::conversation::mcp_task::McpTask;
use ahp_store::conversation::{
    Acting, AgentActor, Bootstrap, Caller, Conversation, ConversationResult as Result, Delivery, DispatchTicket,
    Mutation, NewMessage, Posted, TranscriptMessage, Wake,
};

use super::{Ops, Page};
use crate::carrier::Carriers;

/// The conversation operations ([`Ops`] opened on them).
pub struct Conversations<'a>(pub(super) Ops<'a>);

/// A conversation and one page of its transcript (the cursor: the last message's `seq`).
pub type Transcript = (Conversation, Page<TranscriptMessage, u64>);

impl<'a> Conversations<'a> {
    /// The operations over `store`, scheduling the agents a post wakes on `carriers`.
    pub fn new(store: &'a mut Store, carriers: &'a dyn Carriers) -> Self {
        Self(Ops::new(store, carriers))
    }

    /// A conversation and its transcript after the exclusive `after_seq`, at most `limit`
    /// messages.
    ///
    /// # Errors
    ///
    /// As `get_conversation` and `read_transcript`, or the renewal's.
    pub fn read(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        conversation: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Transcript> {
        self.0.renew(caller, acting)?;
        let c = self.0.store.get_conversation(caller, acting, conversation)?;
        let messages = self
            .0
            .store
            .read_transcript(caller, acting, conversation, after_seq, limit)?;
        Ok((c, Page::of(messages, limit, |m| m.seq)))
    }

    /// Posts `new` through [the one post path](super::posting), after renewing the endpoint of
    /// the agent it acts as.
    ///
    /// # Errors
    ///
    /// As `post_message`, or the renewal's.
    pub fn post(&mut self, caller: &Caller, new: &NewMessage) -> Result<Posted> {
        self.0.renew(caller, &new.acting)?;
        super::posting::post(self.0.store, self.0.carriers, caller, new)
    }

    /// Asks the conversation's agents a question as the human: the post, and the caller's MCP
    /// task that an agent's reply ends, in one commit (the store's `ask_agent`).
    ///
    /// # Errors
    ///
    /// As `ask_agent`.
    pub fn ask(&mut self, caller: &Caller, new: &NewMessage) -> Result<(Posted, McpTask)> {
        let (posted, task) = self.0.store.ask_agent(caller, new)?;
        self.0.carriers.schedule_woken(&posted.woken);
        Ok((posted, task))
    }

    /// One message of a conversation the caller may read, as the human.
    ///
    /// # Errors
    ///
    /// As `read_message`.
    pub fn message(&mut self, caller: &Caller, conversation: &str, id: &str) -> Result<TranscriptMessage> {
        self.0.store.read_message(caller, conversation, id)
    }

    /// [`post`](Self::post) for an agent in its turn: the deliveries the turn consumed and the
    /// host held (`consumes`) are consumed in the post's commit (the store's
    /// `post_message_consuming`).
    ///
    /// # Errors
    ///
    /// As `post_message_consuming`, or the renewal's.
    pub fn post_consuming(&mut self, caller: &Caller, new: &NewMessage, consumes: &[String]) -> Result<Posted> {
        self.0.renew(caller, &new.acting)?;
        super::posting::post_consuming(self.0.store, self.0.carriers, caller, new, consumes)
    }

    /// The agent's inbox after the exclusive `after_order`, at most `limit` deliveries (queued
    /// only, or all).
    ///
    /// # Errors
    ///
    /// As `read_inbox`, or the renewal's.
    pub fn inbox(
        &mut self,
        caller: &Caller,
        agent: &AgentActor,
        after_order: u64,
        limit: usize,
        queued_only: bool,
    ) -> Result<Page<Delivery, u64>> {
        self.0.renew(caller, &Acting::Agent(agent.clone()))?;
        let deliveries = self
            .0
            .store
            .read_inbox(caller, agent, after_order, limit, queued_only)?;
        Ok(Page::of(deliveries, limit, |d| d.delivery_order))
    }

    /// Consumes the agent's delivery of `message`.
    ///
    /// # Errors
    ///
    /// As `consume_delivery`, or the renewal's.
    pub fn consume_delivery(
        &mut self,
        caller: &Caller,
        agent: &AgentActor,
        message: &str,
    ) -> Result<Mutation<Delivery>> {
        self.0.renew(caller, &Acting::Agent(agent.clone()))?;
        self.0.store.consume_delivery(caller, agent, message)
    }

    /// Consumes one exact wake past its dispatch fence.
    ///
    /// # Errors
    ///
    /// As `consume_wake`, or the renewal's.
    pub fn consume_wake(
        &mut self,
        caller: &Caller,
        agent: &AgentActor,
        wake: &str,
        consume_token: &str,
    ) -> Result<Mutation<Wake>> {
        self.0.renew(caller, &Acting::Agent(agent.clone()))?;
        self.0.store.consume_wake(caller, agent, wake, consume_token)
    }

    /// An agent's bounded bootstrap, after accepting the pending `wake` under `activation_key`
    /// when one is given (a turn already running takes its consume token).
    ///
    /// # Errors
    ///
    /// As `activate_wake` and `bootstrap`, or the renewal's.
    pub fn bootstrap(
        &mut self,
        caller: &Caller,
        agent: &AgentActor,
        conversation: Option<&str>,
        wake: Option<&str>,
        activation_key: Option<&str>,
    ) -> Result<(Option<Mutation<DispatchTicket>>, Bootstrap)> {
        self.0.renew(caller, &Acting::Agent(agent.clone()))?;
        let activated = match (activation_key, wake) {
            (Some(key), Some(wake)) => Some(self.0.store.activate_wake(caller, agent, wake, key)?),
            _ => None,
        };
        let b = self.0.store.bootstrap(caller, agent, conversation, wake)?;
        Ok((activated, b))
    }
}
