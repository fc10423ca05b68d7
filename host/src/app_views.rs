//! The MCP App Views this process holds bindings for: the process-local half of an App-carried
//! agent's readiness (the store's binding is the durable half, [`ahp_store::conversation::app_carrier`]).
//!
//! A View binds through this process (`agent_continuation_bind`); the registry remembers the
//! exact endpoint, generation and View (its fence's hash) until the View unbinds or another
//! binding of the agent replaces it. A restarted process starts empty, so an agent whose View
//! bound before the restart is not ready here until that View (or a refreshed one of its window)
//! binds again — the store keeps what it needs to allow that (`host_binding_missing_in_process`).
//! Nothing here is ever read as proof that a turn ran.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use ahp_store::conversation::Endpoint;
use ahp_store::delegation::STALL_QUIET_PERIOD;
use sha2::{Digest, Sha256};

use crate::carrier::Carriers;

/// Most bindings one process holds: one per live App-carried endpoint; a bind past it is
/// refused (`limit`).
pub const MAX_APP_VIEWS: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    agent: String,
    generation: u64,
    /// SHA-256 of the View's fence.
    view: String,
}

/// The View bindings this process holds, by endpoint id, and its App carrier's policy.
#[derive(Debug)]
pub struct AppViews {
    held: Mutex<HashMap<String, Held>>,
    /// How long a goal whose controller an App carries must see no meaningful work, under its
    /// Goal Plan card's observation, before it is stalled (`ahp serve --goal-quiet-period`).
    quiet_period: Duration,
}

impl Default for AppViews {
    fn default() -> Self {
        Self::with_quiet_period(STALL_QUIET_PERIOD)
    }
}

fn digest(fence: &str) -> String {
    hex::encode(Sha256::digest(fence.as_bytes()))
}

impl AppViews {
    /// No bindings yet, and `quiet_period` for goals (within the store's bounds, checked when
    /// an observation uses it).
    pub fn with_quiet_period(quiet_period: Duration) -> Self {
        Self {
            held: Mutex::new(HashMap::new()),
            quiet_period,
        }
    }

    /// The quiet period after which an observed goal is stalled.
    pub fn quiet_period(&self) -> Duration {
        self.quiet_period
    }

    /// Records that the View of `fence` bound `endpoint` (at its generation) through this
    /// process, replacing any binding held for another endpoint of the same agent.
    ///
    /// # Errors
    ///
    /// At [`MAX_APP_VIEWS`] bindings of other endpoints: nothing is recorded.
    pub fn bind(&self, endpoint: &Endpoint, fence: &str) -> Result<(), usize> {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.retain(|id, h| h.agent != endpoint.agent_id || id == &endpoint.id);
        if !held.contains_key(&endpoint.id) && held.len() >= MAX_APP_VIEWS {
            return Err(MAX_APP_VIEWS);
        }
        held.insert(
            endpoint.id.clone(),
            Held {
                agent: endpoint.agent_id.clone(),
                generation: endpoint.generation,
                view: digest(fence),
            },
        );
        Ok(())
    }

    /// Forgets the binding of `endpoint` if the View of `fence` holds it.
    pub fn unbind(&self, endpoint: &str, fence: &str) {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.get(endpoint).is_some_and(|h| h.view == digest(fence)) {
            held.remove(endpoint);
        }
    }

    /// Whether the View of `fence` holds `endpoint`'s binding here, at its generation.
    pub fn holds_view(&self, endpoint: &Endpoint, fence: &str) -> bool {
        self.held(endpoint).is_some_and(|h| h.view == digest(fence))
    }

    /// Whether some View holds `endpoint`'s binding here, at its generation.
    pub fn holds(&self, endpoint: &Endpoint) -> bool {
        self.held(endpoint).is_some()
    }

    fn held(&self, endpoint: &Endpoint) -> Option<Held> {
        let held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.get(&endpoint.id)
            .filter(|h| h.agent == endpoint.agent_id && h.generation == endpoint.generation)
            .cloned()
    }
}

/// A process's carriers when it holds App Views only (no sandboxes): a surface served without
/// `ahp serve`'s controller, and the tests.
#[derive(Debug, Default)]
pub struct ViewCarriers(pub AppViews);

impl Carriers for ViewCarriers {
    fn holds(&self, endpoint: &Endpoint) -> bool {
        endpoint.wake_capable && self.0.holds(endpoint)
    }

    fn app_views(&self) -> Option<&AppViews> {
        Some(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_store::Store;
    use ahp_store::conversation::{AgentCard, Caller};

    fn endpoints() -> (Endpoint, Endpoint) {
        let mut s = Store::open_in_memory().unwrap();
        let alice = Caller::full("account:alice").unwrap();
        let card = AgentCard {
            handle: "a".into(),
            display_name: "A".into(),
            description: String::new(),
            specialties: vec![],
        };
        let a = s.create_agent(&alice, &card, "a").unwrap().value;
        let lease = std::time::Duration::from_secs(60);
        let e1 = s.attach_endpoint(&alice, &a.id, lease, "e1").unwrap().value;
        let e2 = s.attach_endpoint(&alice, &a.id, lease, "e2").unwrap().value;
        (e1, e2)
    }

    #[test]
    fn a_binding_is_the_exact_view_endpoint_and_generation_and_a_successor_replaces_it() {
        let (e1, e2) = endpoints();
        let views = AppViews::default();
        views.bind(&e1, "view-1").unwrap();
        assert!(views.holds(&e1) && views.holds_view(&e1, "view-1"));
        assert!(!views.holds_view(&e1, "view-2"));
        let mut older = e1.clone();
        older.generation += 7;
        assert!(!views.holds(&older), "another generation is not held");
        views.unbind(&e1.id, "view-2");
        assert!(views.holds(&e1), "only the exact View unbinds");
        views.bind(&e2, "view-2").unwrap();
        assert!(!views.holds(&e1), "the agent's successor endpoint replaced it");
        assert!(views.holds_view(&e2, "view-2"));
        views.unbind(&e2.id, "view-2");
        assert!(!views.holds(&e2));
    }
}
