//! A refused call of a conversation or delegation tool: a stable `kind` and a message, sent as
//! the tool error's structured content ([`ToolErrorContent`]). A not-found never echoes the
//! id, so a well-formed foreign id and a nonexistent one read the same.

use ahp_store::conversation::ConversationError;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult};

use super::conversation_schema::ToolErrorContent;

/// A refused call: a stable `kind` and a message, sent as the tool error's structured content.
#[derive(Debug)]
pub struct ToolError(ToolErrorContent);

impl ToolError {
    pub(crate) fn new(kind: &'static str, message: impl Into<String>) -> Self {
        Self(ToolErrorContent {
            kind,
            message: message.into(),
        })
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new("invalid", message)
    }
}

impl From<ConversationError> for ToolError {
    fn from(e: ConversationError) -> Self {
        use ConversationError as E;
        // Not-found messages never echo the id: a foreign id and a missing one read the same.
        let not_found = |what: &str| Self::new("not_found", format!("{what} not found"));
        match e {
            E::AgentNotFound(_) => not_found("agent"),
            E::EndpointNotFound(_) => not_found("endpoint"),
            E::ConversationNotFound(_) => not_found("conversation"),
            E::MessageNotFound(_) => not_found("message"),
            E::WakeNotFound(_) => not_found("wake"),
            E::AttemptNotFound(_) => not_found("wake attempt"),
            E::TaskNotFound(_) => not_found("agent task"),
            E::TaskAttemptNotFound(_) => not_found("task attempt"),
            E::WaitNotFound(_) => not_found("agent wait"),
            E::GoalNotFound(_) => not_found("goal"),
            E::AttentionEventNotFound(_) => not_found("attention event"),
            E::InvalidInput { .. } => Self::new("invalid", e.to_string()),
            E::MissingScope(_) => Self::new("insufficient_scope", e.to_string()),
            E::RevisionConflict { .. } | E::IdempotencyConflict { .. } | E::GoalRevisionConflict { .. } => {
                Self::new("conflict", e.to_string())
            }
            E::EndpointNotCurrent { .. } | E::StaleGeneration { .. } | E::EndpointExpired { .. } => {
                Self::new("stale_endpoint", e.to_string())
            }
            E::NotWakeCapable(_) => Self::new("not_wake_capable", e.to_string()),
            // The caller owns the endpoint (admission is checked first).
            E::AppViewNotBound(_) => Self::new("app_not_bound", e.to_string()),
            E::AppViewConflict(_) => Self::new("app_binding_conflict", e.to_string()),
            // The caller owns the agent (ownership is checked first), so naming the endpoint
            // or agent reveals nothing it does not already see in its listings.
            E::HostHeldEndpoint(_) | E::TransferBoundAgent(_) => Self::new("host_held", e.to_string()),
            E::ConversationClosed(_) => Self::new("closed", e.to_string()),
            E::LimitReached { .. } => Self::new("limit", e.to_string()),
            E::InvalidWakeState { .. }
            | E::InvalidAttemptState { .. }
            | E::ClaimExpired(_)
            | E::InvalidTaskState { .. }
            | E::InvalidTaskAttemptState { .. }
            | E::InvalidGoalState { .. } => Self::new("invalid_state", e.to_string()),
            // The caller sees the resource (visibility is checked first): the fence, the role
            // and the refused source name only what it already reads.
            E::TaskAttemptFenced { .. } => Self::new("fenced", e.to_string()),
            E::AssigneeUnavailable(_) => Self::new("assignee_unavailable", e.to_string()),
            E::NotPermitted { .. } => Self::new("not_permitted", e.to_string()),
            E::WaitSourceRefused { .. } => Self::new("source_refused", e.to_string()),
            E::ConsumeRefused { .. } => Self::new("consume_refused", e.to_string()),
            other => {
                tracing::error!("conversation store failure: {other}");
                Self::new("internal", "the store failed; see the server log")
            }
        }
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        let value = serde_json::to_value(&self.0).expect("error content serializes");
        Ok(CallToolResult::structured_error(value).into())
    }
}
