//! The results of the tools, and the views of the store's resources inside them.

use ahp_store::conversation::{Agent, AgentListing, Author, Conversation, Delivery, Endpoint, TranscriptMessage, Wake};
use schemars::JsonSchema;
use serde::Serialize;

use crate::carrier::Residency;

/// An agent and its card.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    /// `agt_…`.
    pub agent_id: String,
    /// Short mention name.
    pub handle: String,
    /// Human-readable name.
    pub display_name: String,
    /// What the agent does.
    pub description: String,
    /// Specialty labels.
    pub specialties: Vec<String>,
    /// Bumped by every card change.
    pub profile_revision: u64,
    /// Generation of the most recently attached endpoint (0 if none ever was).
    pub controller_generation: u64,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// RFC 3339 UTC.
    pub updated_at: String,
}

impl From<&Agent> for AgentView {
    fn from(a: &Agent) -> Self {
        Self {
            agent_id: a.id.clone(),
            handle: a.card.handle.clone(),
            display_name: a.card.display_name.clone(),
            description: a.card.description.clone(),
            specialties: a.card.specialties.clone(),
            profile_revision: a.profile_revision,
            controller_generation: a.controller_generation,
            created_at: a.created_at.to_string(),
            updated_at: a.updated_at.to_string(),
        }
    }
}

/// The resource `create_agent_identity` and `update_agent_identity` return, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentResult {
    /// `agt_…`.
    pub agent_id: String,
    /// The agent as it now is.
    pub agent: AgentView,
}

impl From<&Agent> for AgentResult {
    fn from(a: &Agent) -> Self {
        Self {
            agent_id: a.id.clone(),
            agent: a.into(),
        }
    }
}

/// One agent of `list_agent_identities`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentListingView {
    /// `agt_…`.
    pub agent_id: String,
    /// The agent and its card.
    pub agent: AgentView,
    /// Bumped by every card change.
    pub profile_revision: u64,
    /// Live endpoints (0 or 1).
    pub active_endpoint_count: u64,
    /// The current endpoint (`ep_…`), when one is live.
    pub endpoint_id: Option<String>,
    /// Deliveries waiting in its inbox.
    pub queued_count: u64,
    /// True only when the agent has a current, unexpired, wake-capable endpoint *and* this
    /// server process holds a carrier for that exact agent and generation. Not presence, not
    /// idleness, not a promise of when a turn runs. False until a carrier exists.
    pub production_auto_resume_available: bool,
    /// For an agent this server carries: `live` while its sandbox is kept here, `parked` when
    /// it was dropped for idleness or room (its next turn starts a fresh one from its
    /// checkpoint; it stays ready). Absent for an agent this server does not carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Residency>,
}

/// What `list_agent_identities` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentListResult {
    /// The caller's agents, ordered by id.
    pub agents: Vec<AgentListingView>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next_after: Option<String>,
}

impl AgentListingView {
    pub(crate) fn new(l: &AgentListing, carrier_held: bool, sandbox: Option<Residency>) -> Self {
        let live = l.current_endpoint.as_ref();
        Self {
            agent_id: l.agent.id.clone(),
            agent: (&l.agent).into(),
            profile_revision: l.agent.profile_revision,
            active_endpoint_count: l.active_endpoint_count,
            endpoint_id: live.map(|e| e.id.clone()),
            queued_count: l.queued_count,
            production_auto_resume_available: live.is_some_and(|e| e.wake_capable) && carrier_held,
            sandbox,
        }
    }
}

/// An endpoint.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointView {
    /// `agt_…`.
    pub agent_id: String,
    /// `ep_…`.
    pub endpoint_id: String,
    /// Its controller generation; agent-acting calls must name it.
    pub controller_generation: u64,
    /// attached, detached, expired or replaced.
    pub state: String,
    /// When the lease runs out unless an agent-acting call renews it, RFC 3339 UTC.
    pub lease_expires_at: String,
    /// Whether its host registered a wake carrier for it.
    pub wake_capable: bool,
}

impl From<&Endpoint> for EndpointView {
    fn from(e: &Endpoint) -> Self {
        Self {
            agent_id: e.agent_id.clone(),
            endpoint_id: e.id.clone(),
            controller_generation: e.generation,
            state: e.state.to_string(),
            lease_expires_at: e.lease_expires_at.to_string(),
            wake_capable: e.wake_capable,
        }
    }
}

/// The resource `attach_agent_endpoint` and `detach_agent_endpoint` return, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointResult {
    /// `agt_…`.
    pub agent_id: String,
    /// `ep_…`.
    pub endpoint_id: String,
    /// Its controller generation.
    pub controller_generation: u64,
    /// The endpoint as it now is.
    pub endpoint: EndpointView,
}

impl From<&Endpoint> for EndpointResult {
    fn from(e: &Endpoint) -> Self {
        Self {
            agent_id: e.agent_id.clone(),
            endpoint_id: e.id.clone(),
            controller_generation: e.generation,
            endpoint: e.into(),
        }
    }
}

/// A conversation.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationView {
    /// `cv_…`.
    pub conversation_id: String,
    /// Its title.
    pub title: String,
    /// open or closed.
    pub state: String,
    /// Agent participants in join order.
    pub agent_ids: Vec<String>,
    /// Messages so far (also the newest seq).
    pub message_count: u64,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// RFC 3339 UTC, when the newest message was posted.
    pub last_message_at: Option<String>,
}

impl From<&Conversation> for ConversationView {
    fn from(c: &Conversation) -> Self {
        Self {
            conversation_id: c.id.clone(),
            title: c.title.clone(),
            state: c.state.to_string(),
            agent_ids: c.agents.clone(),
            message_count: c.message_count,
            created_at: c.created_at.to_string(),
            last_message_at: c.last_message_at.map(|t| t.to_string()),
        }
    }
}

/// The resource `create_conversation` and `close_conversation` return, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationResult {
    /// `cv_…`.
    pub conversation_id: String,
    /// The conversation as it now is.
    pub conversation: ConversationView,
}

impl From<&Conversation> for ConversationResult {
    fn from(c: &Conversation) -> Self {
        Self {
            conversation_id: c.id.clone(),
            conversation: c.into(),
        }
    }
}

/// What `list_conversations` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationListResult {
    /// Conversations whose human participant is the caller, ordered by id.
    pub conversations: Vec<ConversationView>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next_after: Option<String>,
}

/// One transcript message.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    /// `msg_…`.
    pub message_id: String,
    /// `cv_…`.
    pub conversation_id: String,
    /// Position in the conversation, from 1, without gaps.
    pub seq: u64,
    /// `human` or `agent`.
    pub author_kind: String,
    /// The authoring agent, for an agent message.
    pub agent_id: Option<String>,
    /// The endpoint it posted through, for an agent message.
    pub endpoint_id: Option<String>,
    /// That endpoint's generation, for an agent message.
    pub controller_generation: Option<u64>,
    /// The text.
    pub body: String,
    /// The message it answers.
    pub reply_to: Option<String>,
    /// RFC 3339 UTC.
    pub created_at: String,
}

impl From<&TranscriptMessage> for MessageView {
    fn from(m: &TranscriptMessage) -> Self {
        let (kind, agent, endpoint, generation) = match &m.author {
            Author::Human => ("human", None, None, None),
            Author::Agent {
                agent_id,
                endpoint_id,
                generation,
            } => (
                "agent",
                Some(agent_id.clone()),
                Some(endpoint_id.clone()),
                Some(*generation),
            ),
        };
        Self {
            message_id: m.id.clone(),
            conversation_id: m.conversation_id.clone(),
            seq: m.seq,
            author_kind: kind.to_owned(),
            agent_id: agent,
            endpoint_id: endpoint,
            controller_generation: generation,
            body: m.body.clone(),
            reply_to: m.reply_to.clone(),
            created_at: m.created_at.to_string(),
        }
    }
}

/// What `read_conversation` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadConversationResult {
    /// `cv_…`.
    pub conversation_id: String,
    /// The conversation and its participants.
    pub conversation: ConversationView,
    /// Messages after `afterSeq`, oldest first.
    pub messages: Vec<MessageView>,
    /// Pass as `afterSeq` for the next page; absent on the last page.
    pub next_after_seq: Option<u64>,
}

/// The resource `post_message` returns, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostMessageResult {
    /// `cv_…`.
    pub conversation_id: String,
    /// `msg_…`.
    pub message_id: String,
    /// Its seq.
    pub seq: u64,
    /// The message.
    pub message: MessageView,
}

impl From<&TranscriptMessage> for PostMessageResult {
    fn from(m: &TranscriptMessage) -> Self {
        Self {
            conversation_id: m.conversation_id.clone(),
            message_id: m.id.clone(),
            seq: m.seq,
            message: m.into(),
        }
    }
}

/// What `ask_agent` returns: the question and the agent's reply (absent when the synchronous
/// call stopped waiting; the task then still ends with it).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskAgentResult {
    /// `cv_…`.
    pub conversation_id: String,
    /// The question as posted.
    pub question: MessageView,
    /// The agent's reply: the first agent message after the question that replies to it or to
    /// nothing.
    pub reply: Option<MessageView>,
    /// The MCP task (`mtk_…`) the question waits in: `tasks/get` reads it.
    pub task_id: String,
}

impl AskAgentResult {
    /// `question` answered by `reply`, in task `task_id`.
    pub fn answered(question: &TranscriptMessage, reply: &TranscriptMessage, task_id: &str) -> Self {
        Self {
            conversation_id: question.conversation_id.clone(),
            question: question.into(),
            reply: Some(reply.into()),
            task_id: task_id.to_owned(),
        }
    }

    /// `question`, not answered yet, in task `task_id`.
    pub fn waiting(question: &TranscriptMessage, task_id: &str) -> Self {
        Self {
            conversation_id: question.conversation_id.clone(),
            question: question.into(),
            reply: None,
            task_id: task_id.to_owned(),
        }
    }
}

/// One inbox entry.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    /// The delivery's order in the agent's inbox (the `afterDeliveryOrder` cursor).
    pub delivery_id: u64,
    /// The recipient (`agt_…`).
    pub agent_id: String,
    /// queued or consumed.
    pub state: String,
    /// The message.
    pub message: MessageView,
}

impl From<&Delivery> for DeliveryView {
    fn from(d: &Delivery) -> Self {
        Self {
            delivery_id: d.delivery_order,
            agent_id: d.recipient_agent_id.clone(),
            state: d.state.to_string(),
            message: (&d.message).into(),
        }
    }
}

/// What `list_agent_inbox` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxResult {
    /// `agt_…`.
    pub agent_id: String,
    /// Deliveries after `afterDeliveryOrder`, oldest first.
    pub deliveries: Vec<DeliveryView>,
    /// Pass as `afterDeliveryOrder` for the next page; absent on the last page.
    pub next_after_delivery_order: Option<u64>,
}

/// The resource `consume_agent_delivery` returns, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryResult {
    /// `agt_…`.
    pub agent_id: String,
    /// `msg_…`.
    pub message_id: String,
    /// The delivery's inbox order.
    pub delivery_id: u64,
    /// consumed.
    pub state: String,
}

impl From<&Delivery> for DeliveryResult {
    fn from(d: &Delivery) -> Self {
        Self {
            agent_id: d.recipient_agent_id.clone(),
            message_id: d.message.id.clone(),
            delivery_id: d.delivery_order,
            state: d.state.to_string(),
        }
    }
}

/// A wake's safe metadata.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WakeView {
    /// `wk_…`.
    pub wake_id: String,
    /// `agt_…`.
    pub agent_id: String,
    /// pending, claimed, dispatched or consumed.
    pub state: String,
    /// Deliveries coalesced into it.
    pub delivery_count: u64,
    /// The inbox order of the newest of them.
    pub high_water_order: u64,
}

impl From<&Wake> for WakeView {
    fn from(w: &Wake) -> Self {
        Self {
            wake_id: w.id.clone(),
            agent_id: w.agent_id.clone(),
            state: w.state.to_string(),
            delivery_count: w.delivery_count,
            high_water_order: w.high_water_order,
        }
    }
}

/// The resource `consume_agent_wake` returns, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WakeResult {
    /// `agt_…`.
    pub agent_id: String,
    /// `wk_…`.
    pub wake_id: String,
    /// The wake.
    pub wake: WakeView,
}

impl From<&Wake> for WakeResult {
    fn from(w: &Wake) -> Self {
        Self {
            agent_id: w.agent_id.clone(),
            wake_id: w.id.clone(),
            wake: w.into(),
        }
    }
}

/// The explicit activation `bootstrap_agent_conversation` performed.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivationView {
    /// `wk_…`, now dispatched.
    pub wake_id: String,
    /// Present it to `consume_agent_wake` once the turn has processed what it read.
    pub consume_token: String,
    /// An exact retry returned the original attempt and token.
    pub replayed: bool,
    /// This call changed durable state.
    pub state_changed: bool,
}

impl std::fmt::Debug for ActivationView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActivationView")
            .field("wake_id", &self.wake_id)
            .field("consume_token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// What `bootstrap_agent_conversation` returns: bounded; never a transcript or message body.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapResult {
    /// `agt_…`.
    pub agent_id: String,
    /// `ep_…`.
    pub endpoint_id: String,
    /// The endpoint's controller generation.
    pub controller_generation: u64,
    /// The agent and its card.
    pub agent: AgentView,
    /// The endpoint (its lease just renewed).
    pub endpoint: EndpointView,
    /// The selected conversation's summary.
    pub conversation: Option<ConversationView>,
    /// Deliveries waiting in the inbox.
    pub queued_count: u64,
    /// The newest queued delivery's `deliveryId` (0 when none).
    pub queued_high_water_order: u64,
    /// The named wake, or else the agent's open wake.
    pub wake: Option<WakeView>,
    /// The explicit activation, when `activationIdempotencyKey` was given.
    pub activation: Option<ActivationView>,
    /// Replies one dispatched wake may post under `wakeId` + `operationIndex`.
    pub max_reply_operations: u32,
    /// Whether this process holds a carrier that can start a turn for this agent by itself.
    pub production_auto_resume_available: bool,
}

/// The structured content of a refused call.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ToolErrorContent {
    /// Stable, machine-readable: `not_found`, `conflict`, `stale_endpoint`, `closed`,
    /// `invalid`, `limit`, `invalid_state`, `consume_refused`, `not_wake_capable`, `host_held`,
    /// `fenced`, `assignee_unavailable`, `not_permitted`, `source_refused`,
    /// `insufficient_scope` or `internal`.
    pub kind: &'static str,
    /// What went wrong, for a person.
    pub message: String,
}
