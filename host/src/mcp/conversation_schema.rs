//! The conversation tools' arguments and results, in camelCase.
//!
//! Doc comments on fields are the JSON Schema descriptions clients see. Arguments are converted
//! into the store's types, which validate and bound them. Results name their ids `agentId`,
//! `endpointId`, `controllerGeneration`, `conversationId`, `messageId`, `deliveryId` and `wakeId`;
//! mutations say `replayed` (an exact retry returned the original) and `stateChanged` (this call
//! changed durable state). No result ever carries a principal, a digest or an idempotency key;
//! the one secret a result carries is the consume token of an explicit activation, to its caller.

use ahp_store::conversation::{
    Agent, AgentCard, AgentListing, Author, Conversation, Delivery, Endpoint, TranscriptMessage, Wake,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::carrier::Residency;

/// The exact agent identity an agent-acting call is made under.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActingArgs {
    /// The agent (`agt_…`).
    pub agent_id: String,
    /// Its current endpoint (`ep_…`), as `attach_agent_endpoint` returned it.
    pub endpoint_id: String,
    /// That endpoint's controller generation.
    pub controller_generation: u64,
}

/// An Agent Card as written by its owner.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CardArgs {
    /// Short mention name, not unique: 1 to 64 of `a-z 0-9 . _ -`, starting with a letter or digit.
    pub handle: String,
    /// Human-readable name, 1 to 128 bytes.
    pub display_name: String,
    /// What the agent does, at most 4096 bytes (may be empty).
    #[serde(default)]
    pub description: String,
    /// At most 16 distinct labels of `a-z 0-9 . _ -`, each at most 48 bytes.
    #[serde(default)]
    pub specialties: Vec<String>,
}

impl From<CardArgs> for AgentCard {
    fn from(c: CardArgs) -> Self {
        Self {
            handle: c.handle,
            display_name: c.display_name,
            description: c.description,
            specialties: c.specialties,
        }
    }
}

/// Arguments of `create_agent_identity`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateAgentArgs {
    /// The Agent Card.
    #[serde(flatten)]
    pub card: CardArgs,
    /// Caller-generated, 1 to 128 printable ASCII characters: an exact retry returns the same
    /// agent (`replayed: true`); the same key with another card is a `conflict`.
    pub idempotency_key: String,
}

/// Arguments of `update_agent_identity`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateAgentArgs {
    /// The agent (`agt_…`).
    pub agent_id: String,
    /// The `profileRevision` the update is based on; another current revision is a `conflict`.
    pub expected_profile_revision: u64,
    /// The new Agent Card (replaces the whole card).
    #[serde(flatten)]
    pub card: CardArgs,
}

/// Arguments of `list_agent_identities` and `list_conversations`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PageArgs {
    /// Exclusive cursor: the last id of the previous page (`nextAfter`).
    #[serde(default)]
    pub after: Option<String>,
    /// Page size, 1 to 200 (default 50).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Arguments of `attach_agent_endpoint`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachArgs {
    /// The agent (`agt_…`), which the caller must own.
    pub agent_id: String,
    /// Lease in seconds, 1 to 3600 (default 300). Every agent-acting call through the endpoint
    /// renews it; there is no separate heartbeat.
    #[serde(default)]
    pub lease_seconds: Option<u64>,
    /// Caller-generated, 1 to 128 printable ASCII characters: an exact retry returns the same
    /// endpoint.
    pub idempotency_key: String,
}

/// Arguments of `detach_agent_endpoint`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DetachArgs {
    /// The agent (`agt_…`).
    pub agent_id: String,
    /// The exact endpoint to detach (`ep_…`); a successor is never touched.
    pub endpoint_id: String,
}

/// Arguments of `bootstrap_agent_conversation`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapArgs {
    /// The acting agent, endpoint and generation.
    #[serde(flatten)]
    pub acting: ActingArgs,
    /// A conversation (`cv_…`) the agent participates in, to summarize.
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// A wake (`wk_…`) of the agent to report on or, with `activationIdempotencyKey`, to activate.
    #[serde(default)]
    pub wake_id: Option<String>,
    /// For a turn that is already running: accept the pending `wakeId` now (it crosses the
    /// dispatch fence) and return its consume token. An exact retry with the same key returns the
    /// same attempt and token; the key reused for anything else is a `conflict`.
    #[serde(default)]
    pub activation_idempotency_key: Option<String>,
}

/// Arguments of `create_conversation`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateConversationArgs {
    /// 1 to 200 bytes.
    pub title: String,
    /// Agent participants (`agt_…`), each owned by the caller, at most 64. The caller is the
    /// human participant.
    #[serde(default)]
    pub agent_ids: Vec<String>,
    /// Caller-generated, 1 to 128 printable ASCII characters.
    pub idempotency_key: String,
}

/// Arguments of `read_conversation`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadConversationArgs {
    /// The conversation (`cv_…`).
    pub conversation_id: String,
    /// Exclusive cursor: messages with a greater seq (default 0: from the start).
    #[serde(default)]
    pub after_seq: u64,
    /// Page size, 1 to 200 (default 50).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Read as this agent participant (all three together); absent: as the human participant.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The agent's current endpoint.
    #[serde(default)]
    pub endpoint_id: Option<String>,
    /// That endpoint's controller generation.
    #[serde(default)]
    pub controller_generation: Option<u64>,
}

/// Arguments of `post_message`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PostMessageArgs {
    /// The conversation (`cv_…`).
    pub conversation_id: String,
    /// The text, 1 to 65,536 bytes.
    pub body: String,
    /// A message (`msg_…`) of the same conversation this one answers.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Caller-generated, 1 to 128 printable ASCII characters; or give `wakeId` + `operationIndex`.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// For a reply from a woken turn: the dispatched wake (`wk_…`) …
    #[serde(default)]
    pub wake_id: Option<String>,
    /// … and which reply of that wake this is (0 to 63).
    #[serde(default)]
    pub operation_index: Option<u32>,
    /// Post as this agent participant (all three together); absent: as the human participant.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The agent's current endpoint.
    #[serde(default)]
    pub endpoint_id: Option<String>,
    /// That endpoint's controller generation.
    #[serde(default)]
    pub controller_generation: Option<u64>,
}

/// Arguments of `list_agent_inbox`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxArgs {
    /// The acting agent, endpoint and generation.
    #[serde(flatten)]
    pub acting: ActingArgs,
    /// Exclusive cursor: deliveries with a greater `deliveryId` (default 0).
    #[serde(default)]
    pub after_delivery_order: u64,
    /// Page size, 1 to 200 (default 50).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only deliveries not yet consumed (default true).
    #[serde(default)]
    pub queued_only: Option<bool>,
}

/// Arguments of `consume_agent_delivery`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeDeliveryArgs {
    /// The acting agent, endpoint and generation.
    #[serde(flatten)]
    pub acting: ActingArgs,
    /// The delivered message (`msg_…`).
    pub message_id: String,
}

/// Arguments of `consume_agent_wake`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeWakeArgs {
    /// The acting agent, endpoint and generation (those the wake was dispatched through).
    #[serde(flatten)]
    pub acting: ActingArgs,
    /// The wake (`wk_…`).
    pub wake_id: String,
    /// The consume token its dispatch or activation returned (`wct_…`).
    pub consume_token: String,
}

/// Arguments of `close_conversation`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloseConversationArgs {
    /// The conversation (`cv_…`), whose human participant the caller is.
    pub conversation_id: String,
}

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

/// What `create_agent_identity` and `update_agent_identity` return.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentResult {
    /// `agt_…`.
    pub agent_id: String,
    /// An exact retry returned the original.
    pub replayed: bool,
    /// This call changed durable state.
    pub state_changed: bool,
    /// The agent as it now is.
    pub agent: AgentView,
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

/// What `attach_agent_endpoint` and `detach_agent_endpoint` return.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointResult {
    /// `agt_…`.
    pub agent_id: String,
    /// `ep_…`.
    pub endpoint_id: String,
    /// Its controller generation.
    pub controller_generation: u64,
    /// An exact retry returned the original.
    pub replayed: bool,
    /// This call changed durable state.
    pub state_changed: bool,
    /// The endpoint as it now is.
    pub endpoint: EndpointView,
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

/// What `create_conversation` and `close_conversation` return.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationResult {
    /// `cv_…`.
    pub conversation_id: String,
    /// An exact retry returned the original.
    pub replayed: bool,
    /// This call changed durable state.
    pub state_changed: bool,
    /// The conversation as it now is.
    pub conversation: ConversationView,
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

/// What `post_message` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostMessageResult {
    /// `cv_…`.
    pub conversation_id: String,
    /// `msg_…`.
    pub message_id: String,
    /// Its seq.
    pub seq: u64,
    /// An exact retry returned the original message.
    pub replayed: bool,
    /// This call changed durable state.
    pub state_changed: bool,
    /// The message.
    pub message: MessageView,
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

/// What `consume_agent_delivery` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryResult {
    /// `agt_…`.
    pub agent_id: String,
    /// `msg_…`.
    pub message_id: String,
    /// The delivery's inbox order.
    pub delivery_id: u64,
    /// false when it was already consumed (desired-state idempotent).
    pub state_changed: bool,
    /// Always false: consume is desired-state idempotent, not keyed.
    pub replayed: bool,
    /// consumed.
    pub state: String,
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

/// What `consume_agent_wake` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WakeResult {
    /// `agt_…`.
    pub agent_id: String,
    /// `wk_…`.
    pub wake_id: String,
    /// false for an exact retry after success.
    pub state_changed: bool,
    /// Always false: consume is exact, not keyed.
    pub replayed: bool,
    /// The wake.
    pub wake: WakeView,
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
