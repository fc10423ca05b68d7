//! The MCP App carrier's arguments and results: the agent-continuation card's tools and the
//! Goal Plan card's (see [`crate::mcp::app_tools`]).

use ahp_store::conversation::{AppAcquire, AppBindingHolder, Endpoint, WakeAttempt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ActingArgs, EndpointView};

/// Arguments of `present_agent_continuation`: the exact agent, endpoint and generation the card
/// carries — named, never inferred.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PresentContinuationArgs {
    /// The agent (`agt_…`), the caller's.
    pub agent_id: String,
    /// Its current endpoint (`ep_…`), attached by the caller (`attach_agent_endpoint`).
    pub endpoint_id: String,
    /// That endpoint's controller generation.
    pub expected_controller_generation: u64,
}

/// What `present_agent_continuation` returns: the card's identity (the card takes no other).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PresentContinuationResult {
    /// `agt_…`.
    pub agent_id: String,
    /// `ep_…`.
    pub endpoint_id: String,
    /// The endpoint's controller generation.
    pub controller_generation: u64,
    /// The agent's handle.
    pub handle: String,
    /// The agent's display name.
    pub display_name: String,
    /// The card's resource.
    pub resource_uri: String,
}

/// Arguments of the card's calls: the agent acting through its exact endpoint, and the View.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ViewArgs {
    /// The agent, endpoint and generation the card carries.
    #[serde(flatten)]
    pub acting: ActingArgs,
    /// The View's binding fence: `ahp_host_binding_` and 32 lowercase hex digits, drawn from the
    /// browser's secure random source when the View loaded.
    pub binding_id: String,
}

/// Arguments of `agent_continuation_acquire`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcquireArgs {
    /// The View.
    #[serde(flatten)]
    pub view: ViewArgs,
    /// How long the claim holds before the fence (1–300 s; default 60).
    #[serde(default)]
    pub claim_seconds: Option<u64>,
    /// When no wake is pending, how long to wait for one before answering `idle` (0–25 s;
    /// default 0: at once). The wait ends at the wake, and lasts at most half of what is left
    /// of the endpoint's lease (the card's next state call renews it).
    #[serde(default)]
    pub wait_seconds: Option<u64>,
}

/// Arguments of `agent_continuation_prepare`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrepareArgs {
    /// The View.
    #[serde(flatten)]
    pub view: ViewArgs,
    /// The attempt this View claimed (`wka_…`).
    pub attempt_id: String,
}

/// What the View saw after the fence.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishOutcome {
    /// The chat host accepted the `ui/message` (not proof that a turn ran).
    DispatchAccepted,
    /// Anything that cannot prove the message was not delivered.
    DeliveryUnknown,
}

/// Arguments of `agent_continuation_finish`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishArgs {
    /// The View.
    #[serde(flatten)]
    pub view: ViewArgs,
    /// The attempt (`wka_…`).
    pub attempt_id: String,
    /// What the View saw.
    pub outcome: FinishOutcome,
}

/// Whether this server process holds the View's binding.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostBinding {
    /// The exact View holds the endpoint's binding in this process.
    pub bound: bool,
}

/// Why a View that the store still knows must bind again.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindingRecovery {
    /// `host_binding_missing_in_process`: the server restarted (or another process serves the
    /// View now) and holds no binding for this endpoint; the View (or a refreshed one of its
    /// window) binds again.
    pub kind: String,
}

/// An attempt as the card sees it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppAttemptView {
    /// `wka_…`.
    pub attempt_id: String,
    /// `wk_…`.
    pub wake_id: String,
    /// claimed, dispatched, accepted, delivery_unknown, consumed or released.
    pub state: String,
}

impl From<&WakeAttempt> for AppAttemptView {
    fn from(a: &WakeAttempt) -> Self {
        Self {
            attempt_id: a.id.clone(),
            wake_id: a.wake_id.clone(),
            state: a.state.to_string(),
        }
    }
}

/// What `agent_continuation_bind` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindResult {
    /// Now bound in this process.
    pub host_binding: HostBinding,
    /// bound, renewed or rebound (a refreshed View of the window took over).
    pub outcome: String,
    /// Attempts of earlier Views this bind settled.
    pub settled_attempts: usize,
    /// The endpoint, its lease renewed.
    pub endpoint: EndpointView,
}

/// What `agent_continuation_state` returns: the View's heartbeat.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateResult {
    /// Whether this process holds the exact View's binding.
    pub host_binding: HostBinding,
    /// this_view, no_view or other_view: who holds the binding in the store.
    pub holder: String,
    /// The asking View is of the window recorded on the endpoint.
    pub same_window: bool,
    /// Set when the store still names this View (or its window) but this process holds no
    /// binding: bind again. `null` otherwise.
    pub recovery: Option<BindingRecovery>,
    /// The View's attempt not yet resolved, if any.
    pub attempt: Option<AppAttemptView>,
    /// A wake waits to be acquired.
    pub wake_pending: bool,
    /// Whether the agent can be resumed by itself now (as `list_agent_identities` says it).
    pub production_auto_resume_available: bool,
    /// The endpoint.
    pub endpoint: EndpointView,
}

/// What `agent_continuation_acquire` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcquireResult {
    /// claimed (prepare it), open (the View's attempt is not resolved yet) or idle.
    pub kind: String,
    /// The attempt, for claimed and open.
    pub attempt: Option<AppAttemptView>,
}

impl From<&AppAcquire> for AcquireResult {
    fn from(a: &AppAcquire) -> Self {
        match a {
            AppAcquire::Claimed { claim } => Self {
                kind: "claimed".into(),
                attempt: Some((&claim.attempt).into()),
            },
            AppAcquire::Open { attempt } => Self {
                kind: "open".into(),
                attempt: Some(attempt.into()),
            },
            AppAcquire::Idle => Self {
                kind: "idle".into(),
                attempt: None,
            },
        }
    }
}

/// The bounded automatic continuation message the View sends the host as its one `ui/message`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutomaticMessage {
    /// 1.
    pub version: u32,
    /// `agt_…`.
    pub agent_id: String,
    /// `ep_…`.
    pub endpoint_id: String,
    /// The endpoint's controller generation.
    pub controller_generation: u64,
    /// `wk_…`: the wake the turn consumes.
    pub wake_id: String,
    /// `wka_…`: the attempt this message is the one dispatch of.
    pub attempt_id: String,
    /// `wct_…`: the consume token, for this turn's exact `consume_agent_wake` only.
    pub consume_token: String,
    /// The message itself (at most 4 KiB), naming all of the above.
    pub text: String,
}

/// The App protocol part of a prepare answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AppProtocol {
    /// The message to send.
    pub automatic_message: AutomaticMessage,
}

/// The output of a prepare answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PrepareOutput {
    /// For the card only.
    pub app_protocol: AppProtocol,
}

/// What `agent_continuation_prepare` returns (`output.app_protocol.automatic_message`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct PrepareResult {
    /// The envelope.
    pub output: PrepareOutput,
}

/// What `agent_continuation_finish` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishResult {
    /// The attempt as it now is.
    pub attempt: AppAttemptView,
    /// This call changed it (false for the same outcome again, or after the consume).
    pub state_changed: bool,
}

/// What `agent_continuation_unbind` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnbindResult {
    /// The View held the binding and let it go (false: it did not hold it).
    pub state_changed: bool,
    /// The endpoint.
    pub endpoint: EndpointView,
}

/// An endpoint selector: agent, endpoint and generation.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSelector {
    /// `agt_…`.
    pub agent_id: String,
    /// `ep_…`.
    pub endpoint_id: String,
    /// Its controller generation.
    pub controller_generation: u64,
}

impl From<&Endpoint> for EndpointSelector {
    fn from(e: &Endpoint) -> Self {
        Self {
            agent_id: e.agent_id.clone(),
            endpoint_id: e.id.clone(),
            controller_generation: e.generation,
        }
    }
}

/// The decision of `agent_continuation_recover_endpoint`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointRecoveryView {
    /// live (nothing done) or replaced.
    pub kind: String,
    /// The selector the View named.
    pub old: EndpointSelector,
    /// Its successor, one generation on (replaced only): the card's new identity.
    pub successor: Option<EndpointSelector>,
    /// The replacement was made by an earlier call whose answer was lost.
    pub replayed: bool,
}

/// What `agent_continuation_recover_endpoint` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoverEndpointResult {
    /// The server's decision.
    pub endpoint_recovery: EndpointRecoveryView,
}

/// Arguments of `present_goal_plan` and `goal_plan_observe`: the goal, as the owner sees it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoalPlanArgs {
    /// The goal (`goal_…`).
    pub goal_id: String,
}

/// What `present_goal_plan` returns: the card's goal.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PresentGoalPlanResult {
    /// `goal_…`.
    pub goal_id: String,
    /// Its title.
    pub title: String,
    /// The card's resource.
    pub resource_uri: String,
}

/// A stalled attention as the Goal Plan card shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StalledView {
    /// `att_…`.
    pub attention_event_id: String,
    /// The controller it woke.
    pub target_agent_id: Option<String>,
    /// When it was recorded, RFC 3339 UTC.
    pub created_at: String,
}

/// What `goal_plan_observe` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalPlanResult {
    /// The goal: plan, steps, revision, last checkpoint note.
    pub goal: crate::mcp::delegation_schema::GoalView,
    /// Its last meaningful work, RFC 3339 UTC.
    pub last_meaningful_work_at: String,
    /// When the current run of observations began, RFC 3339 UTC.
    pub observed_since: String,
    /// The stalled attention of the current epoch, if any.
    pub stalled: Option<StalledView>,
}

/// A store holder as the wire names it.
pub fn holder_name(h: AppBindingHolder) -> &'static str {
    match h {
        AppBindingHolder::ThisView => "this_view",
        AppBindingHolder::NoView => "no_view",
        AppBindingHolder::OtherView => "other_view",
    }
}
