//! The readiness flag, and the scheduler: whether this process holds the live wake carrier of an
//! endpoint, and how a committed post tells it whom to run.
//!
//! A transferred agent's endpoint is wake-capable because its sandbox lives in some `ahp serve`
//! process (an App-carried agent's, because a View bound it through one: [`crate::app_views`]);
//! the store records the endpoint, its generation and the host that attached it (or that the
//! View bound it through), but only a process knows whether it still holds the sandbox or the
//! binding — this one for its own carriers, and, for another host's, that host's live lease
//! vouches for it. Every surface that shows an agent's readiness
//! (`productionAutoResumeAvailable` in `list_agent_identities`, the console's agent cards)
//! asks a [`Carriers`]; every surface that posts ([`crate::ops::posting`]) hands it the agents the
//! post woke.

use ahp_store::conversation::Endpoint;

/// What this process knows about the wake carriers it holds.
pub trait Carriers: Send + Sync + 'static {
    /// Whether a live carrier holds `endpoint` (at its generation): this process's own, or a
    /// wake-capable endpoint of another host whose lease holds.
    fn holds(&self, endpoint: &Endpoint) -> bool;

    /// A committed post woke `agents` (`agt_…`, what the store's `post_message` returned):
    /// schedule a dispatch opportunity for each this process carries. It must not read the
    /// store (it runs on whatever thread posted, possibly with the store locked). Nothing by
    /// default.
    fn schedule_woken(&self, _agents: &[String]) {}

    /// For an agent this process carries through `endpoint` (at its generation): whether its
    /// sandbox is live here or parked (see [`crate::sandbox::park`]). `None` for one it does
    /// not carry. `None` by default.
    fn residency(&self, _endpoint: &Endpoint) -> Option<Residency> {
        None
    }

    /// The sandboxes of `transfers` were just parked (dropped): forget what is held for them
    /// while they were live. It must not read the store. Nothing by default.
    fn parked(&self, _transfers: &[String]) {}

    /// The MCP App Views bound through this process ([`crate::app_views`]); `None` for a
    /// process that binds none (its App tools refuse). `None` by default.
    fn app_views(&self) -> Option<&crate::app_views::AppViews> {
        None
    }
}

/// Where a carried agent's sandbox is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Residency {
    /// Its sandbox is kept here (or running a turn).
    Live,
    /// No sandbox: its state is its checkpoint, and its next turn starts a fresh sandbox.
    Parked,
}

impl Residency {
    /// `live` or `parked`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Parked => "parked",
        }
    }
}

/// A process that holds no carriers (the CLI, a surface without a controller, tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCarriers;

impl Carriers for NoCarriers {
    fn holds(&self, _endpoint: &Endpoint) -> bool {
        false
    }
}

/// Carriers that hold nothing and record each set of agents they are asked to schedule: what
/// the tests of a surface's scheduling read back.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Recorded(pub(crate) std::sync::Mutex<Vec<Vec<String>>>);

#[cfg(test)]
impl Carriers for Recorded {
    fn holds(&self, _endpoint: &Endpoint) -> bool {
        false
    }

    fn schedule_woken(&self, agents: &[String]) {
        self.0.lock().unwrap().push(agents.to_vec());
    }
}
