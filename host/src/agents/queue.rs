//! The controller's dispatch queue: bounded, deduplicated, one entry per agent.
//!
//! An agent is either absent, queued once, or running. Scheduling a queued agent changes
//! nothing; scheduling a running one marks it to run again once its turn ends (so a message
//! committed during a turn is never missed, and a burst of posts coalesces into at most one
//! more opportunity). The queue never holds more agents than its capacity; an opportunity
//! refused at capacity is logged and found again by the next sweep.

use std::collections::{HashSet, VecDeque};

/// See the [module docs](self).
#[derive(Debug)]
pub(crate) struct DispatchQueue {
    order: VecDeque<String>,
    queued: HashSet<String>,
    running: HashSet<String>,
    again: HashSet<String>,
    capacity: usize,
}

impl DispatchQueue {
    /// An empty queue holding at most `capacity` agents.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            order: VecDeque::new(),
            queued: HashSet::new(),
            running: HashSet::new(),
            again: HashSet::new(),
            capacity,
        }
    }

    /// Schedules one dispatch opportunity for `agent`. Returns whether a worker should be woken.
    pub(crate) fn push(&mut self, agent: &str) -> bool {
        if self.running.contains(agent) {
            self.again.insert(agent.to_owned());
            return false;
        }
        if self.queued.contains(agent) {
            return false;
        }
        if self.order.len() >= self.capacity {
            tracing::warn!(%agent, capacity = self.capacity, "dispatch queue full; the next sweep retries");
            return false;
        }
        self.queued.insert(agent.to_owned());
        self.order.push_back(agent.to_owned());
        true
    }

    /// The next agent to run, now marked running.
    pub(crate) fn pop(&mut self) -> Option<String> {
        let agent = self.order.pop_front()?;
        self.queued.remove(&agent);
        self.running.insert(agent.clone());
        Some(agent)
    }

    /// `agent`'s turn ended. Returns whether it was scheduled meanwhile and is queued again.
    pub(crate) fn done(&mut self, agent: &str) -> bool {
        self.running.remove(agent);
        self.again.remove(agent) && self.push(agent)
    }

    /// Takes every queued agent, in order, as if a worker ran each at once.
    pub(crate) fn drain(&mut self) -> Vec<String> {
        let mut taken = Vec::new();
        while let Some(agent) = self.pop() {
            self.running.remove(&agent);
            self.again.remove(&agent);
            taken.push(agent);
        }
        taken
    }

    /// Agents queued or running.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len() + self.running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deduplicates_coalesces_and_bounds() {
        let mut q = DispatchQueue::new(2);
        assert!(q.push("a"));
        assert!(!q.push("a"), "a queued agent is not queued twice");
        assert!(q.push("b"));
        assert!(!q.push("c"), "past capacity nothing is queued");
        assert_eq!(q.pop().as_deref(), Some("a"));
        // Fifty posts while a runs: one more opportunity.
        for _ in 0..50 {
            q.push("a");
        }
        assert_eq!(q.len(), 2);
        assert!(q.done("a"));
        assert_eq!(q.pop().as_deref(), Some("b"));
        assert_eq!(q.pop().as_deref(), Some("a"));
        assert!(!q.done("a"));
        assert!(!q.done("b"));
        assert_eq!(q.pop(), None);
        assert_eq!(q.len(), 0);
    }
}
