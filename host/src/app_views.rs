//! The MCP App Views this process holds bindings for: the process-local half of an App-carried
//! agent's readiness (the store's binding is the durable half, [`ahp_store::conversation::app_carrier`]).
//!
//! A View binds through this process (`agent_continuation_bind`); the registry remembers the
//! exact endpoint, generation and View (its fence's hash) until the View unbinds or another
//! binding of the agent replaces it. A restarted process starts empty, so an agent whose View
//! bound before the restart is not ready here until that View (or a refreshed one of its window)
//! binds again — the store keeps what it needs to allow that (`host_binding_missing_in_process`).
//! Nothing here is ever read as proof that a turn ran.
//!
//! It also holds the Views' **waits**: a card's acquire may wait for the agent's next wake
//! (`waitSeconds`) instead of polling; every dispatch opportunity this process schedules for an
//! agent ([`AppViews::woken`]: a post, a task, another host's signal) wakes the acquires waiting
//! for it, which then look at the store again. At most [`MAX_WAITING_ACQUIRES`] wait at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp_store::conversation::Endpoint;
use ahp_store::delegation::STALL_QUIET_PERIOD;
use sha2::{Digest, Sha256};

use crate::carrier::Carriers;

/// Most bindings one process holds: one per live App-carried endpoint; a bind past it is
/// refused (`limit`).
pub const MAX_APP_VIEWS: usize = 100_000;

/// Most acquires that wait for a wake at once in one process: a quarter of the listener's
/// connections ([`crate::mcp::listener::Limits`]), so waiting cards never crowd out other
/// clients. An acquire past it answers at once, as without a wait.
pub const MAX_WAITING_ACQUIRES: usize = 256;

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
    /// The acquires waiting for a wake, by agent: one notifier per agent some acquire waits for.
    waiting: Arc<Mutex<Waiting>>,
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
            waiting: Arc::default(),
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

    /// A place in the line of acquires waiting for `agent`'s next wake, or `None` at
    /// [`MAX_WAITING_ACQUIRES`] (the caller answers at once). The place is given back when the
    /// returned [`WakeWait`] is dropped.
    pub fn wait_for_wake(&self, agent: &str) -> Option<WakeWait> {
        let mut waiting = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if waiting.count >= MAX_WAITING_ACQUIRES {
            return None;
        }
        waiting.count += 1;
        let notify = Arc::clone(waiting.by_agent.entry(agent.to_owned()).or_default());
        Some(WakeWait {
            waiting: Arc::clone(&self.waiting),
            agent: agent.to_owned(),
            notify,
        })
    }

    /// This process scheduled a dispatch opportunity for `agent` (a post or task woke it, or
    /// another host signalled it): the acquires waiting for it look at the store again.
    pub fn woken(&self, agent: &str) {
        let waiting = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(notify) = waiting.by_agent.get(agent) {
            notify.notify_waiters();
        }
    }

    /// How many acquires wait now.
    pub fn waiting_acquires(&self) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .count
    }

    fn held(&self, endpoint: &Endpoint) -> Option<Held> {
        let held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.get(&endpoint.id)
            .filter(|h| h.agent == endpoint.agent_id && h.generation == endpoint.generation)
            .cloned()
    }
}

/// The acquires waiting for a wake.
#[derive(Debug, Default)]
struct Waiting {
    /// How many wait, over all agents.
    count: usize,
    /// One notifier per agent some acquire waits for; removed with its last waiter.
    by_agent: HashMap<String, Arc<tokio::sync::Notify>>,
}

/// One acquire's place in the line of those waiting for an agent's next wake
/// ([`AppViews::wait_for_wake`]).
#[derive(Debug)]
pub struct WakeWait {
    waiting: Arc<Mutex<Waiting>>,
    agent: String,
    notify: Arc<tokio::sync::Notify>,
}

impl WakeWait {
    /// Resolves at the agent's next [`AppViews::woken`] after it is enabled: enable it (pin it
    /// and call `enable`) *before* looking at the store, so a wake committed between the look
    /// and the wait is not missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for WakeWait {
    fn drop(&mut self) {
        let mut waiting = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        waiting.count = waiting.count.saturating_sub(1);
        // The map and this wait hold the last two references: nobody else waits for the agent.
        if Arc::strong_count(&self.notify) <= 2 {
            waiting.by_agent.remove(&self.agent);
        }
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

    fn schedule_woken(&self, agents: &[String]) {
        for agent in agents {
            self.0.woken(agent);
        }
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

    #[tokio::test]
    async fn waits_are_woken_by_their_agent_only_and_the_line_is_bounded() {
        let views = AppViews::default();
        let a = views.wait_for_wake("agt_a").unwrap();
        let b = views.wait_for_wake("agt_b").unwrap();
        {
            let (wa, wb) = (a.notified(), b.notified());
            tokio::pin!(wa, wb);
            wa.as_mut().enable();
            wb.as_mut().enable();
            views.woken("agt_a");
            let short = Duration::from_millis(50);
            assert!(
                tokio::time::timeout(short, wa).await.is_ok(),
                "its agent's wake ends the wait"
            );
            assert!(
                tokio::time::timeout(short, wb).await.is_err(),
                "another agent's does not"
            );
        }

        // The line holds MAX_WAITING_ACQUIRES; one past is refused until a place is given back.
        let mut line: Vec<_> = (2..MAX_WAITING_ACQUIRES)
            .map(|i| views.wait_for_wake(&format!("agt_{i}")).unwrap())
            .collect();
        assert_eq!(views.waiting_acquires(), MAX_WAITING_ACQUIRES);
        assert!(views.wait_for_wake("agt_a").is_none());
        line.pop();
        assert!(views.wait_for_wake("agt_a").is_some());
        drop((a, b, line));
        assert_eq!(views.waiting_acquires(), 0);
        assert!(
            views.waiting.lock().unwrap().by_agent.is_empty(),
            "no notifier outlives its waits"
        );
    }
}
