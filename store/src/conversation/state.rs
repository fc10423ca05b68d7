//! The domain's state machines: the states of endpoints, wakes, wake delivery attempts, agent
//! tasks, task attempts and goals, and the events that move them.
//!
//! Each machine is a closed enum (stored by name; an unknown name read from the database fails
//! closed) and, where it has edges, an `after(event)` giving the one state an event leads to.
//! Every write of a state is a compare-and-set along one of these edges. They sit at the
//! domain's root, below everything that moves them and below [`ConversationError`](super::ConversationError),
//! which names them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

// Endpoints.

closed_enum!(
    /// Where an endpoint is in its life. Only `attached` admits operations.
    EndpointState, "endpoint state", {
        /// The agent's current controller (while its lease lasts).
        Attached = "attached",
        /// Withdrawn by its principal.
        Detached = "detached",
        /// Its lease ran out (recorded lazily).
        Expired = "expired",
        /// A newer endpoint was attached to the same agent.
        Replaced = "replaced",
    }
);

// Wakes.

closed_enum!(
    /// Where a wake intent is.
    WakeState, "wake state", {
        /// Waiting for a carrier to claim it; later deliveries coalesce into it.
        Pending = "pending",
        /// A carrier claimed it and has not crossed the dispatch fence; still coalescing.
        Claimed = "claimed",
        /// An attempt crossed the dispatch fence; it will not be dispatched again.
        Dispatched = "dispatched",
        /// The agent consumed it with the exact attempt's token.
        Consumed = "consumed",
    }
);

/// Something that moves a wake intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WakeEvent {
    /// A carrier claimed it.
    Claim,
    /// Its claim was released before the fence.
    Release,
    /// Its attempt crossed the dispatch fence.
    Dispatch,
    /// A turn that is already running accepted it (bootstrap's explicit activation): it crosses
    /// the fence at once, without a carrier's claim.
    Activate,
    /// The agent consumed it.
    Consume,
}

impl WakeState {
    /// The state `event` moves a wake in this state to, or `None` when there is no such edge.
    /// This is the wake state machine; every write is a compare-and-set along one of its edges.
    pub const fn after(self, event: WakeEvent) -> Option<WakeState> {
        match (self, event) {
            (Self::Pending, WakeEvent::Claim) => Some(Self::Claimed),
            (Self::Claimed, WakeEvent::Release) => Some(Self::Pending),
            (Self::Claimed, WakeEvent::Dispatch) => Some(Self::Dispatched),
            (Self::Pending, WakeEvent::Activate) => Some(Self::Dispatched),
            (Self::Dispatched, WakeEvent::Consume) => Some(Self::Consumed),
            _ => None,
        }
    }
}

// Wake delivery attempts.

closed_enum!(
    /// Where a wake delivery attempt is.
    AttemptState, "wake attempt state", {
        /// Claimed, before the dispatch fence.
        Claimed = "claimed",
        /// Given up before the fence; its wake went back to pending.
        Released = "released",
        /// Crossed the dispatch fence; outcome not yet reported.
        Dispatched = "dispatched",
        /// The carrier reported that the host accepted the turn.
        Accepted = "accepted",
        /// After the fence, the outcome could not be confirmed. Never redispatched.
        DeliveryUnknown = "delivery_unknown",
        /// The agent consumed the wake through this attempt.
        Consumed = "consumed",
    }
);

/// Something that moves a wake delivery attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptEvent {
    /// `prepare_dispatch`: cross the fence.
    Dispatch,
    /// Give up before the fence (claim expired, endpoint gone, takeover).
    Release,
    /// The carrier reported the host accepted the turn.
    Accept,
    /// The outcome after the fence cannot be confirmed: reported by the carrier for a
    /// dispatched attempt, or found at reconciliation for a dispatched one or an accepted one
    /// that was never consumed.
    Unknown,
    /// The agent consumed the wake through this attempt.
    Consume,
}

impl AttemptState {
    /// The state `event` moves an attempt in this state to, or `None` when there is no such
    /// edge. There is no edge back to `claimed` from anywhere: a fenced attempt is never retried.
    pub const fn after(self, event: AttemptEvent) -> Option<AttemptState> {
        match (self, event) {
            (Self::Claimed, AttemptEvent::Dispatch) => Some(Self::Dispatched),
            (Self::Claimed, AttemptEvent::Release) => Some(Self::Released),
            (Self::Dispatched, AttemptEvent::Accept) => Some(Self::Accepted),
            (Self::Dispatched | Self::Accepted, AttemptEvent::Unknown) => Some(Self::DeliveryUnknown),
            (Self::Dispatched | Self::Accepted | Self::DeliveryUnknown, AttemptEvent::Consume) => Some(Self::Consumed),
            _ => None,
        }
    }
}

// Agent tasks.

closed_enum!(
    /// Where an agent task is.
    TaskState, "agent task state", {
        /// Created; no attempt is active.
        Open = "open",
        /// An attempt is active.
        Running = "running",
        /// An attempt finished it successfully.
        Succeeded = "succeeded",
        /// An attempt finished it as failed, or its outcome became unknown after the dispatch
        /// fence ([`DELIVERY_UNKNOWN_RESULT`](super::delegation::DELIVERY_UNKNOWN_RESULT)).
        Failed = "failed",
        /// Cancelled by its creator, the owner or its goal's controller.
        Cancelled = "cancelled",
    }
);

/// Something that moves a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskEvent {
    /// An attempt started.
    Start,
    /// The active attempt was revoked before its dispatch fence.
    Revoke,
    /// The attempt finished successfully.
    Succeed,
    /// The attempt finished as failed, or its outcome became unknown after the dispatch fence.
    Fail,
    /// Cancelled.
    Cancel,
}

impl TaskState {
    /// The state `event` moves a task in this state to, or `None` when there is no such edge.
    /// Every write is a compare-and-set along one of these edges.
    pub const fn after(self, event: TaskEvent) -> Option<TaskState> {
        match (self, event) {
            (Self::Open, TaskEvent::Start) => Some(Self::Running),
            (Self::Running, TaskEvent::Revoke) => Some(Self::Open),
            (Self::Running, TaskEvent::Succeed) => Some(Self::Succeeded),
            (Self::Running, TaskEvent::Fail) => Some(Self::Failed),
            (Self::Open | Self::Running, TaskEvent::Cancel) => Some(Self::Cancelled),
            _ => None,
        }
    }

    /// Whether it is final (a wait's source has its terminal fact).
    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

// Task attempts.

closed_enum!(
    /// Where a task attempt is.
    TaskAttemptState, "task attempt state", {
        /// Fenced to the assignee's endpoint; its result is awaited.
        Active = "active",
        /// Finished successfully.
        Succeeded = "succeeded",
        /// Finished as failed.
        Failed = "failed",
        /// Its task was cancelled while it was active.
        Cancelled = "cancelled",
        /// Its endpoint went away before its wake crossed the dispatch fence: it never ran.
        Revoked = "revoked",
        /// After the dispatch fence the outcome could not be confirmed: never re-run.
        DeliveryUnknown = "delivery_unknown",
    }
);

/// Something that moves a task attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskAttemptEvent {
    /// The assignee finished it successfully.
    Succeed,
    /// The assignee finished it as failed.
    Fail,
    /// Its task was cancelled.
    Cancel,
    /// Its endpoint went away before the fence.
    Revoke,
    /// Its delivery outcome after the fence is unknown.
    Unknown,
}

impl TaskAttemptState {
    /// The state `event` moves an attempt in this state to, or `None` when there is no such edge.
    pub const fn after(self, event: TaskAttemptEvent) -> Option<TaskAttemptState> {
        match (self, event) {
            (Self::Active, TaskAttemptEvent::Succeed) => Some(Self::Succeeded),
            (Self::Active, TaskAttemptEvent::Fail) => Some(Self::Failed),
            (Self::Active, TaskAttemptEvent::Cancel) => Some(Self::Cancelled),
            (Self::Active, TaskAttemptEvent::Revoke) => Some(Self::Revoked),
            (Self::Active, TaskAttemptEvent::Unknown) => Some(Self::DeliveryUnknown),
            _ => None,
        }
    }
}

// Goals.

closed_enum!(
    /// Where a goal is.
    GoalState, "goal state", {
        /// Being worked on; checkpoints and new tasks are accepted.
        Active = "active",
        /// Explicitly completed.
        Completed = "completed",
        /// Explicitly abandoned.
        Abandoned = "abandoned",
    }
);

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use super::*;

    /// Checks `after` against a machine's whole table: every (state, event) pair leads where
    /// `edges` says, and nowhere (`None`) when `edges` has no such edge.
    fn follows<S, E>(all: &[S], events: &[E], edges: &[(S, E, S)], after: fn(S, E) -> Option<S>)
    where
        S: Copy + PartialEq + Debug,
        E: Copy + PartialEq + Debug,
    {
        for &state in all {
            for &event in events {
                let expect = edges
                    .iter()
                    .find(|(f, e, _)| *f == state && *e == event)
                    .map(|(_, _, t)| *t);
                assert_eq!(after(state, event), expect, "{state:?} on {event:?}");
            }
        }
    }

    #[test]
    fn wake_edges_over_every_state_and_event() {
        use WakeEvent as E;
        use WakeState as S;
        let events = [E::Claim, E::Release, E::Dispatch, E::Activate, E::Consume];
        let edges = [
            (S::Pending, E::Claim, S::Claimed),
            (S::Claimed, E::Release, S::Pending),
            (S::Claimed, E::Dispatch, S::Dispatched),
            (S::Pending, E::Activate, S::Dispatched),
            (S::Dispatched, E::Consume, S::Consumed),
        ];
        follows(S::ALL, &events, &edges, S::after);
        // Nothing leads back to pending once the fence is crossed.
        for event in events {
            assert_ne!(S::Dispatched.after(event), Some(S::Pending));
            assert_ne!(S::Consumed.after(event), Some(S::Pending));
        }
    }

    #[test]
    fn wake_attempt_edges_over_every_state_and_event() {
        use AttemptEvent as E;
        use AttemptState as S;
        let events = [E::Dispatch, E::Release, E::Accept, E::Unknown, E::Consume];
        let edges = [
            (S::Claimed, E::Dispatch, S::Dispatched),
            (S::Claimed, E::Release, S::Released),
            (S::Dispatched, E::Accept, S::Accepted),
            (S::Dispatched, E::Unknown, S::DeliveryUnknown),
            (S::Accepted, E::Unknown, S::DeliveryUnknown),
            (S::Dispatched, E::Consume, S::Consumed),
            (S::Accepted, E::Consume, S::Consumed),
            (S::DeliveryUnknown, E::Consume, S::Consumed),
        ];
        follows(S::ALL, &events, &edges, S::after);
    }

    #[test]
    fn task_edges_over_every_state_and_event() {
        use TaskEvent as E;
        use TaskState as S;
        let events = [E::Start, E::Revoke, E::Succeed, E::Fail, E::Cancel];
        let edges = [
            (S::Open, E::Start, S::Running),
            (S::Running, E::Revoke, S::Open),
            (S::Running, E::Succeed, S::Succeeded),
            (S::Running, E::Fail, S::Failed),
            (S::Open, E::Cancel, S::Cancelled),
            (S::Running, E::Cancel, S::Cancelled),
        ];
        follows(S::ALL, &events, &edges, S::after);
        // Nothing leaves a terminal state.
        for &state in S::ALL.iter().filter(|s| s.is_terminal()) {
            for event in events {
                assert_eq!(state.after(event), None);
            }
        }
    }

    #[test]
    fn task_attempt_edges_over_every_state_and_event() {
        use TaskAttemptEvent as E;
        use TaskAttemptState as S;
        let events = [E::Succeed, E::Fail, E::Cancel, E::Revoke, E::Unknown];
        let edges = [
            (S::Active, E::Succeed, S::Succeeded),
            (S::Active, E::Fail, S::Failed),
            (S::Active, E::Cancel, S::Cancelled),
            (S::Active, E::Revoke, S::Revoked),
            (S::Active, E::Unknown, S::DeliveryUnknown),
        ];
        follows(S::ALL, &events, &edges, S::after);
        // In particular, delivery_unknown never leads back to active or to a result.
        for event in events {
            assert_eq!(S::DeliveryUnknown.after(event), None);
        }
    }

    /// Every state's stored name parses back to it; another spelling is refused.
    fn round_trips<S>(all: &[S], foreign: &str)
    where
        S: Copy + PartialEq + Debug + FromStr + fmt::Display,
        <S as FromStr>::Err: Debug,
    {
        for &s in all {
            assert_eq!(s.to_string().parse::<S>().unwrap(), s);
        }
        assert!(foreign.parse::<S>().is_err(), "{foreign:?}");
        assert!("".parse::<S>().is_err());
    }

    #[test]
    fn stored_names_round_trip_and_unknown_names_are_refused() {
        round_trips(EndpointState::ALL, "Attached");
        round_trips(WakeState::ALL, "Pending");
        round_trips(AttemptState::ALL, "claimed ");
        round_trips(TaskState::ALL, "Open");
        round_trips(TaskAttemptState::ALL, "ACTIVE");
        round_trips(GoalState::ALL, "done");
    }
}
