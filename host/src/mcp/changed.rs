//! The one result envelope of every MCP write: the resource as it now is, and what the call
//! did. Each write tool returns `Changed<R>`, where `R` is its resource's ids and view
//! (`TaskResult`, `EndpointResult`, …); the flags sit beside the resource's fields on the wire
//! (`{"taskId": …, "task": {…}, "replayed": false, "stateChanged": true}`), the same for every
//! tool, so a client reads the outcome of any write one way.

use ahp_store::conversation::Mutation;
use schemars::JsonSchema;
use serde::Serialize;

/// A write's result: its resource `R` and what the call did.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Changed<R> {
    /// The resource as it now is.
    #[serde(flatten)]
    pub resource: R,
    /// An exact retry of a keyed write returned the original (always false for a
    /// desired-state or exact operation, and for a read).
    pub replayed: bool,
    /// This call changed durable state (false for a retry, a desired state already reached, or
    /// a read).
    pub state_changed: bool,
}

impl<R> Changed<R> {
    /// The result of the write `m`, its value shown as `R`.
    pub fn of<T>(m: &Mutation<T>) -> Self
    where
        R: for<'a> From<&'a T>,
    {
        Self {
            resource: (&m.value).into(),
            replayed: m.replayed,
            state_changed: m.state_changed,
        }
    }

    /// A resource read, in the shape of a write that changed nothing (`get_goal`,
    /// `read_agent_wait`).
    pub fn unchanged<T>(value: &T) -> Self
    where
        R: for<'a> From<&'a T>,
    {
        Self {
            resource: value.into(),
            replayed: false,
            state_changed: false,
        }
    }
}
