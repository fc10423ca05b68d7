//! The conversation domain's error type.
//!
//! [`ConversationError`]: not-found variants are deliberately identical for "does not exist" and "exists but is outside
//! your reach": every authoritative lookup is scoped by the caller's principal (and authorized
//! parent) *before* any state is inspected, so a foreign id simply is not found, with the very
//! same message. Once access is proven, own-resource diagnostics (a revision conflict, a stale
//! generation, a closed conversation) are explicit. Any error means the operation changed
//! nothing — except [`ConversationError::EndpointExpired`], whose only effect is to record the expiry that
//! had already happened.

use super::scope::Scope;
use super::state::{AttemptState, EndpointState, GoalState, TaskAttemptState, TaskState, WakeState};

/// The conversation domain's result type.
pub type ConversationResult<T, E = ConversationError> = std::result::Result<T, E>;

/// Everything a conversation operation can fail with. Named apart from [`crate::Error`] (the
/// transfer side's) so that a file using both reads unambiguously.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationError {
    /// An input from outside broke a documented rule or bound.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The offending field.
        field: &'static str,
        /// What rule it broke, including the bound where there is one.
        reason: String,
    },

    /// The caller's credentials do not carry the scope this operation needs.
    #[error("missing scope {0}")]
    MissingScope(Scope),

    /// No agent with this id is within the caller's reach.
    #[error("agent {0} not found")]
    AgentNotFound(String),

    /// No endpoint with this id is within the caller's reach.
    #[error("endpoint {0} not found")]
    EndpointNotFound(String),

    /// No conversation with this id is within the caller's reach.
    #[error("conversation {0} not found")]
    ConversationNotFound(String),

    /// No message with this id is within the authorized conversation (or inbox).
    #[error("message {0} not found")]
    MessageNotFound(String),

    /// No wake with this id belongs to the acting agent.
    #[error("wake {0} not found")]
    WakeNotFound(String),

    /// No wake delivery attempt with this id belongs to the acting endpoint.
    #[error("wake attempt {0} not found")]
    AttemptNotFound(String),

    /// An agent-card update named a profile revision that is no longer current.
    #[error("agent {agent} is at profile revision {current}, not {expected}; re-read it and retry")]
    RevisionConflict {
        /// The agent.
        agent: String,
        /// The revision the caller based its update on.
        expected: u64,
        /// The current revision.
        current: u64,
    },

    /// The endpoint is no longer attached (detached, replaced or expired).
    #[error("endpoint {endpoint} is {state}, not attached")]
    EndpointNotCurrent {
        /// The endpoint.
        endpoint: String,
        /// Its state.
        state: EndpointState,
    },

    /// The caller named a controller generation that is not the endpoint's.
    #[error("endpoint {endpoint} has controller generation {current}, not {given}")]
    StaleGeneration {
        /// The endpoint.
        endpoint: String,
        /// The generation the caller sent.
        given: u64,
        /// The endpoint's generation.
        current: u64,
    },

    /// The endpoint's lease ran out; the expiry has now been recorded. Attach a new endpoint.
    #[error("endpoint {endpoint} lease expired; attach a new endpoint")]
    EndpointExpired {
        /// The endpoint.
        endpoint: String,
    },

    /// The endpoint is held by the host for a transferred agent: only the host acts through it
    /// (it drives the agent's turns in the sandbox). The caller owns the agent and may talk to
    /// it as the human, but not act as it.
    #[error("endpoint {0} is held by the host for a transferred agent; only the host acts through it")]
    HostHeldEndpoint(String),

    /// The agent is a transfer's: its endpoint is attached and withdrawn only by the host (by
    /// binding and by the transfer's end), never by a caller.
    #[error("agent {0} is a transferred agent; its endpoint is the host's to attach and detach")]
    TransferBoundAgent(String),

    /// Wake delivery needs an endpoint the host has registered as wake-capable.
    #[error("endpoint {0} is not registered as wake-capable by its host")]
    NotWakeCapable(String),

    /// The MCP App View's binding fence is not the one that holds the endpoint's App binding
    /// (or none does): the View binds first ([`crate::Store::bind_app_view`]).
    #[error("endpoint {0} is not bound by this View; bind it first")]
    AppViewNotBound(String),

    /// Another View, not of the window that holds the endpoint's App binding, tried to bind
    /// it or replace it: a live binding is replaced only from its own window.
    #[error("endpoint {0} is bound from another window; only that window's View may bind it")]
    AppViewConflict(String),

    /// The conversation is closed to new messages and participants.
    #[error("conversation {0} is closed")]
    ConversationClosed(String),

    /// The idempotency key was already used by this principal for a different request.
    #[error("idempotency key already used for a different {operation} request")]
    IdempotencyConflict {
        /// The operation the key belongs to.
        operation: &'static str,
    },

    /// A documented bound on the number of something was reached.
    #[error("limit reached: at most {limit} {what}")]
    LimitReached {
        /// What is counted.
        what: &'static str,
        /// The bound.
        limit: u64,
    },

    /// The wake is not in a state that allows the operation (e.g. a reply identity or consume
    /// before the dispatch fence).
    #[error("cannot {operation} wake {wake}: it is {state}")]
    InvalidWakeState {
        /// The wake.
        wake: String,
        /// What was attempted.
        operation: &'static str,
        /// Where the wake is.
        state: WakeState,
    },

    /// The wake attempt is not in a state that allows the operation.
    #[error("cannot {operation} wake attempt {attempt}: it is {state}")]
    InvalidAttemptState {
        /// The attempt.
        attempt: String,
        /// What was attempted.
        operation: &'static str,
        /// Where the attempt is.
        state: AttemptState,
    },

    /// The attempt's claim lease ran out before the dispatch fence; the wake is pending again.
    #[error("wake attempt {0} claim expired before dispatch; the wake is pending again")]
    ClaimExpired(String),

    /// `consume_wake` named a wake whose dispatched attempt does not match every given field.
    #[error("wake {wake} cannot be consumed: {reason}")]
    ConsumeRefused {
        /// The wake.
        wake: String,
        /// Which field did not match.
        reason: &'static str,
    },

    /// No agent task with this id is within the caller's reach.
    #[error("agent task {0} not found")]
    TaskNotFound(String),

    /// No task attempt with this id belongs to the acting agent.
    #[error("task attempt {0} not found")]
    TaskAttemptNotFound(String),

    /// No wait with this id is within the caller's reach.
    #[error("agent wait {0} not found")]
    WaitNotFound(String),

    /// No goal with this id is within the caller's reach.
    #[error("goal {0} not found")]
    GoalNotFound(String),

    /// No attention event with this id is within the caller's reach.
    #[error("attention event {0} not found")]
    AttentionEventNotFound(String),

    /// The task is not in a state that allows the operation (e.g. starting an attempt of a
    /// running task, or cancelling a finished one).
    #[error("cannot {operation} agent task {task}: it is {state}")]
    InvalidTaskState {
        /// The task.
        task: String,
        /// What was attempted.
        operation: &'static str,
        /// Where the task is.
        state: TaskState,
    },

    /// The task attempt is not in a state that allows the operation, or a retry of its
    /// completion named a different outcome or result than the one recorded.
    #[error("cannot {operation} task attempt {attempt}: it is {state}")]
    InvalidTaskAttemptState {
        /// The attempt.
        attempt: String,
        /// What was attempted.
        operation: &'static str,
        /// Where the attempt is.
        state: TaskAttemptState,
    },

    /// The acting endpoint is not the one the attempt is fenced to (a newer or older
    /// controller generation of the assignee).
    #[error("task attempt {attempt} is fenced to endpoint {endpoint} generation {generation}")]
    TaskAttemptFenced {
        /// The attempt.
        attempt: String,
        /// The endpoint it is fenced to.
        endpoint: String,
        /// That endpoint's controller generation.
        generation: u64,
    },

    /// The assignee has no attached endpoint with an unexpired lease to fence an attempt to
    /// (attach one first), or, for a transfer's agent, none that can take a turn: its component
    /// takes no turns, or its transfer is insolvent.
    #[error("agent {0} has no attached endpoint that can run a task attempt")]
    AssigneeUnavailable(String),

    /// The caller can see the resource but its role does not allow the operation (e.g. the
    /// assignee cancelling a task, or an agent other than the controller registering a
    /// Goal-scoped wait).
    #[error("{role} may not {operation} {resource}")]
    NotPermitted {
        /// The resource.
        resource: String,
        /// What was attempted.
        operation: &'static str,
        /// The caller's role.
        role: &'static str,
    },

    /// A Goal-scoped wait must be registered before any of its tasks reaches a terminal state
    /// (the attention already created for it is never retracted), and over tasks of that goal.
    #[error("agent task {task} cannot be a source of a wait on goal {goal}: {reason}")]
    WaitSourceRefused {
        /// The task.
        task: String,
        /// The goal.
        goal: String,
        /// Why: already terminal, or not correlated with the goal.
        reason: &'static str,
    },

    /// A goal checkpoint named a revision that is no longer current.
    #[error("goal {goal} is at revision {current}, not {expected}; re-read it and retry")]
    GoalRevisionConflict {
        /// The goal.
        goal: String,
        /// The revision the caller based its checkpoint on.
        expected: u64,
        /// The current revision.
        current: u64,
    },

    /// The goal is not in a state that allows the operation (it was completed or abandoned).
    #[error("cannot {operation} goal {goal}: it is {state}")]
    InvalidGoalState {
        /// The goal.
        goal: String,
        /// What was attempted.
        operation: &'static str,
        /// Where the goal is.
        state: GoalState,
    },

    /// A row holds a value this build cannot interpret (e.g. an unknown lifecycle). Fails closed.
    #[error("corrupt row in {table}: {reason}")]
    CorruptRow {
        /// The table read.
        table: &'static str,
        /// What was wrong.
        reason: String,
    },

    /// The database failed (including a commit whose fsync failed: never retried).
    #[error("database: {0}")]
    Database(#[from] ahp_store_sql::SqlError),
}

impl ConversationError {
    /// Whether the failure is transient — the database was busy or locked — rather than a
    /// refusal or a fault: nothing was changed, and the same call may succeed if made again
    /// (as [`crate::Error::is_transient`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Database(e) if e.is_transient())
    }

    /// An [`Error::InvalidInput`] for `field`.
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            field,
            reason: reason.into(),
        }
    }

    /// An [`Error::CorruptRow`] for `table`.
    pub(crate) fn corrupt(table: &'static str, reason: impl Into<String>) -> Self {
        Self::CorruptRow {
            table,
            reason: reason.into(),
        }
    }
}

impl crate::error::WriteError for ConversationError {
    fn is_transient(&self) -> bool {
        ConversationError::is_transient(self)
    }
}
