//! Cross-cutting tests of the conversation domain, through the public `Store` methods.
//!
//! - `agents`: agent cards and endpoints (generations, replacement, leases, detach);
//! - `posting`: conversations, the post transaction, deliveries, fault injection, idempotency;
//! - `wakes`: coalescing, claims, the dispatch fence, exact consume, reconciliation;
//! - `hiding`: existence hiding and fail-closed lifecycle parsing;
//! - `limits`: bounds at the limit and one past it;
//! - `model`: a proptest model of random interleavings;
//! - `concurrency`: sixteen writers on separate connections;
//! - `consume`: a no-op consume answers from a read, without the write lock;
//! - `upgrade`: migrating a database written before this domain existed;
//! - `fail_closed`: unknown persisted states refused by every SQL filter, not only by parsing;
//! - `fixes`: the clock inside the write lock, whole-store bounds, idempotency retention, the
//!   unresolved-dispatch bound, bounded attempt listing;
//! - `audit`: the audit log's events, and that no event or `Debug` output carries content;
//! - `answered`: a reply consumes what it answers; tries; the owner skips a stuck delivery;
//! - `activation`: bootstrap and explicit activation of a pending wake;
//! - `carrier`: a turn's end in one transaction, claims given back, unconfirmed attempts
//!   settled, the endpoints with a wake to claim;
//! - `woken`: the agents a post reports it woke, for the host to schedule;
//! - `cursors`: a delivery or an event that commits late is never behind a reader's cursor;
//! - `mcp_tasks`: MCP tasks created with their work and ended once with it;
//! - `app_carrier`: the MCP App pull carrier (bind, refresh, restart, unbind, expiry and
//!   replacement; a View's acquire, prepare and finish);
//! - `app_model`: a proptest model of the App carrier's interleavings.

mod activation;
mod agents;
mod answered;
mod app_carrier;
mod app_model;
mod audit;
mod carrier;
mod concurrency;
mod consume;
mod cursors;
mod fail_closed;
mod fixes;
mod hiding;
mod limits;
mod mcp_calls;
mod mcp_tasks;
mod model;
mod posting;
mod turn_spend;
mod upgrade;
mod wakes;
mod woken;

use std::sync::Arc;
use std::time::Duration;

use super::*;
#[allow(unused_imports)]
use super::{ConversationError as Error, ConversationResult as Result};
use crate::clock::{ManualClock, Timestamp};
use crate::db::Store;

/// Default endpoint lease in tests.
pub(super) const LEASE: Duration = Duration::from_secs(600);
/// Default claim lease in tests.
pub(super) const CLAIM: Duration = Duration::from_secs(30);
/// The longest claim lease.
pub(super) const MAX_CLAIM: Duration = bounds::MAX_CLAIM_LEASE;

/// A store on a manual clock, with two principals.
pub(super) struct World {
    pub(super) store: Store,
    pub(super) clock: ManualClock,
    pub(super) alice: Caller,
    pub(super) bob: Caller,
    keys: u64,
}

pub(super) fn world() -> World {
    world_over(crate::testing::store().unwrap())
}

/// A world over `store` (a connection to a database other connections share, say).
pub(super) fn world_over(store: Store) -> World {
    let clock = ManualClock::new(Timestamp::from_micros(1_800_000_000_000_000));
    let store = store.with_clock(Arc::new(clock.clone()));
    World {
        store,
        clock,
        alice: Caller::full("account:alice").unwrap(),
        bob: Caller::full("account:bob").unwrap(),
        keys: 0,
    }
}

pub(super) fn card(handle: &str) -> AgentCard {
    AgentCard {
        handle: handle.into(),
        display_name: format!("Agent {handle}"),
        description: "does things".into(),
        specialties: vec!["testing".into()],
    }
}

impl World {
    /// The broken invariants of the delegation domain and the MCP tasks, as `rule subject`.
    pub(super) fn violations(&mut self) -> Vec<String> {
        crate::conversation::delegation::check::violations(&self.store.autocommit())
            .unwrap()
            .into_iter()
            .map(|v| format!("{} {}", v.rule, v.subject))
            .collect()
    }

    pub(super) fn key(&mut self) -> String {
        self.keys += 1;
        format!("k-{}", self.keys)
    }

    pub(super) fn agent(&mut self, who: &Caller) -> Agent {
        let k = self.key();
        self.store.create_agent(who, &card("helper"), &k).unwrap().value
    }

    /// A live, wake-capable endpoint for `agent`.
    pub(super) fn attach(&mut self, who: &Caller, agent: &Agent) -> AgentActor {
        let k = self.key();
        let ep = self.store.attach_endpoint(who, &agent.id, LEASE, &k).unwrap().value;
        self.store
            .register_wake_carrier(&ep.agent_id, &ep.id, ep.generation)
            .unwrap();
        AgentActor::of(&ep)
    }

    pub(super) fn conversation(&mut self, who: &Caller, agents: &[&Agent]) -> Conversation {
        let k = self.key();
        let new = NewConversation {
            title: "test".into(),
            agents: agents.iter().map(|a| a.id.clone()).collect(),
        };
        self.store.create_conversation(who, &new, &k).unwrap().value
    }

    pub(super) fn new_post(&mut self, cv: &Conversation, acting: Acting, body: &str) -> NewMessage {
        NewMessage {
            conversation: cv.id.clone(),
            acting,
            body: body.into(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(self.key()),
        }
    }

    pub(super) fn post(
        &mut self,
        who: &Caller,
        cv: &Conversation,
        acting: Acting,
        body: &str,
    ) -> Result<TranscriptMessage> {
        let p = self.new_post(cv, acting, body);
        self.store.post_message(who, &p).map(|m| m.value)
    }

    /// The whole database, serialized: equal before and after means a call changed nothing.
    pub(super) fn bytes(&mut self) -> Vec<String> {
        crate::testing::dump(&mut self.store)
    }

    pub(super) fn count(&mut self, sql: &str) -> i64 {
        self.store.autocommit().query_row(sql, [], |r| r.get(0)).unwrap()
    }
}
