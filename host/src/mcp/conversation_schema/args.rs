//! The arguments of the tools, as clients send them.

use ahp_store::conversation::AgentCard;
use schemars::JsonSchema;
use serde::Deserialize;

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

/// Arguments of `ask_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskAgentArgs {
    /// The conversation (`cv_…`) whose agents are asked.
    pub conversation_id: String,
    /// The question, 1 to 65,536 bytes.
    pub body: String,
    /// Caller-generated, 1 to 128 printable ASCII characters: a retry with the same key asks
    /// nothing new and answers with the same question (and its task).
    pub idempotency_key: String,
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
