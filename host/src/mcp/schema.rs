//! The MCP tools' arguments and results, in the Handoff Protocol's camelCase.
//!
//! Doc comments on fields are the JSON Schema descriptions clients see. Arguments are converted
//! into the store's types, which validate and bound them; results carry at least `transferId`
//! and `status`.

use ahp_store::{Budget, Event, Transfer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One message of the session's history.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageArg {
    /// Who spoke: lowercase letters, `_` or `-` (e.g. `user`, `assistant`, `tool`), at most 32 bytes.
    pub role: String,
    /// What was said, at most 256 KiB.
    pub content: String,
}

/// An MCP server the session used.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerArg {
    /// The server's http(s) URL, without credentials or query string.
    pub server: String,
    /// Name of the vault entry holding its credential (a reference, never the secret):
    /// letters, digits, `.`, `_`, `-`, at most 128 bytes.
    pub cred_ref: String,
}

/// Arguments of `snapshot_state`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotStateArgs {
    /// Where the session runs now (printable ASCII, no spaces, at most 255 bytes).
    pub source_host: String,
    /// The session's system prompt (at most 64 KiB).
    pub system_prompt: String,
    /// The conversation so far, oldest first (at most 10,000 messages, 8 MiB in all).
    pub message_history: Vec<MessageArg>,
    /// The agent's working memory: a JSON object (at most 1 MiB, 32 levels deep).
    pub tool_state: serde_json::Value,
    /// The MCP servers the session used, with credential references (at most 32).
    pub mcp_config: Vec<McpServerArg>,
}

impl From<SnapshotStateArgs> for ahp_store::SnapshotInput {
    fn from(a: SnapshotStateArgs) -> Self {
        Self {
            source_host: a.source_host,
            system_prompt: a.system_prompt,
            message_history: a
                .message_history
                .into_iter()
                .map(|m| ahp_store::Message {
                    role: m.role,
                    content: m.content,
                })
                .collect(),
            tool_state: a.tool_state,
            mcp_config: a
                .mcp_config
                .into_iter()
                .map(|m| ahp_store::McpServer {
                    server: m.server,
                    cred_ref: m.cred_ref,
                })
                .collect(),
        }
    }
}

/// A destination size.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TierArg {
    /// Tight ceilings, cheapest: ¼ CPU-second and 32 MiB per turn.
    Nano,
    /// An ordinary agent: 5 CPU-seconds and 256 MiB per turn.
    Small,
    /// Long analytical turns: 30 CPU-seconds and 2 GiB per turn.
    Large,
}

impl From<TierArg> for ahp_store::Tier {
    fn from(t: TierArg) -> Self {
        match t {
            TierArg::Nano => Self::Nano,
            TierArg::Small => Self::Small,
            TierArg::Large => Self::Large,
        }
    }
}

/// Arguments of `provision_runtime`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisionRuntimeArgs {
    /// The transfer (`tr_…`), as `snapshot_state` returned it.
    pub transfer_id: String,
    /// A single-use transfer token of scope `provision_runtime` for this transfer, minted by the
    /// orchestrator with `ahp token issue` (no tool mints tokens).
    pub token: String,
    /// The destination's size, which fixes its ceilings and its price.
    pub tier: TierArg,
    /// What the transfer may spend in all, in micro-USD (1 to 10,000,000,000).
    pub budget_micro_usd: u64,
    /// The guest component to run: a `sha256:<64 hex>` digest or a registered name.
    pub component: String,
}

/// Arguments of `push_state`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushStateArgs {
    /// The transfer (`tr_…`).
    pub transfer_id: String,
    /// The checksum `snapshot_state` returned; if given it must match the stored snapshot.
    #[serde(default)]
    pub checksum: Option<String>,
}

/// Arguments of `activate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActivateArgs {
    /// The transfer (`tr_…`).
    pub transfer_id: String,
    /// A single-use transfer token of scope `activate` for this transfer. It is spent even if
    /// the guest fails to resume; a retry needs a new one.
    pub token: String,
}

/// Arguments of `report_usage`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReportUsageArgs {
    /// The transfer (`tr_…`).
    pub transfer_id: String,
    /// Spend to add, in micro-USD (1 to 1,000,000,000).
    pub amount_micro_usd: u64,
    /// What was spent on: a-z, 0-9 and `_`, at most 32 bytes (e.g. `model_tokens`); default
    /// `unspecified`.
    #[serde(default)]
    pub kind: Option<String>,
}

/// Arguments of `get_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetStatusArgs {
    /// The transfer (`tr_…`).
    pub transfer_id: String,
    /// How many events to return, newest first counted, 1 to 500; default 50.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Only events older than this event id: the `nextBefore` of the previous page. Omit it for
    /// the newest events.
    #[serde(default)]
    pub before: Option<i64>,
}

impl GetStatusArgs {
    /// The page of events asked for (an out-of-range limit is the store's to refuse).
    pub fn page(&self) -> ahp_store::EventPage {
        ahp_store::EventPage {
            limit: self.limit.map_or(ahp_store::DEFAULT_EVENT_PAGE_LIMIT, |l| {
                usize::try_from(l).unwrap_or(usize::MAX)
            }),
            before: self.before,
        }
    }
}

/// A transfer after an operation.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferResult {
    /// The transfer (`tr_…`).
    pub transfer_id: String,
    /// Its status: staged, provisioned, pushed, active, insolvent, terminated or expired.
    pub status: String,
    /// Whether an activation is in progress.
    pub activating: bool,
    /// SHA-256 of the snapshot's canonical JSON (lowercase hex); pass it to `push_state`.
    pub checksum: String,
    /// The destination's tier, once provisioned.
    pub tier: Option<String>,
    /// The guest component, once provisioned.
    pub component: Option<String>,
    /// The agent identity (`agt_…`) the transfer became at activation: open a conversation
    /// with it through the conversation tools. Absent before the first activation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

impl From<&Transfer> for TransferResult {
    fn from(t: &Transfer) -> Self {
        Self {
            transfer_id: t.id.clone(),
            status: t.status.to_string(),
            activating: t.activating,
            checksum: t.checksum.clone(),
            tier: t.tier.map(|x| x.to_string()),
            component: t.component.clone(),
            agent_id: t.agent_id.clone(),
        }
    }
}

/// A budget, in micro-USD.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetResult {
    /// What the transfer may spend in all.
    pub allocated_micro_usd: u64,
    /// What it has spent (may end above the allocation by the last report).
    pub spent_micro_usd: u64,
    /// What is left (never negative).
    pub remaining_micro_usd: u64,
    /// Price of one CPU-second at its tier.
    pub rate_micro_usd_per_cpu_second: u64,
}

impl From<Budget> for BudgetResult {
    fn from(b: Budget) -> Self {
        Self {
            allocated_micro_usd: b.allocated_micro_usd,
            spent_micro_usd: b.spent_micro_usd,
            remaining_micro_usd: b.remaining_micro_usd(),
            rate_micro_usd_per_cpu_second: b.rate_micro_usd_per_cpu_second,
        }
    }
}

/// What `report_usage` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageResult {
    /// The transfer (`tr_…`).
    pub transfer_id: String,
    /// Its status after the report (`insolvent` once spend reaches the allocation).
    pub status: String,
    /// The budget after the report.
    pub budget: BudgetResult,
}

/// One audit-log entry.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventResult {
    /// Position in the log; later events have larger ids.
    pub id: i64,
    /// What happened (e.g. `snapshot_created`, `activated`, `insolvent`).
    pub kind: String,
    /// When, RFC 3339 UTC.
    pub at: String,
    /// Particulars; never a secret.
    pub detail: serde_json::Value,
}

impl From<&Event> for EventResult {
    fn from(e: &Event) -> Self {
        Self {
            id: e.id,
            kind: e.kind.to_string(),
            at: e.at.to_string(),
            detail: e.detail.clone(),
        }
    }
}

/// What `get_status` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    /// The transfer (`tr_…`).
    pub transfer_id: String,
    /// Its status.
    pub status: String,
    /// The transfer's details.
    pub transfer: TransferResult,
    /// Its budget, once provisioned.
    pub budget: Option<BudgetResult>,
    /// The newest events older than `before` (all the newest without it), at most `limit`,
    /// oldest first.
    pub events: Vec<EventResult>,
    /// Pass as `before` to read the page of older events; `null` when these reach the first.
    pub next_before: Option<i64>,
}
