//! The durable conversation domain: how humans and agents talk, durably.
//!
//! The domain of the conversation seed: conversations and, built on them, [`delegation`] (tasks,
//! waits, goals, attention). One file per concept, listed from the root up: a file imports only
//! from files listed before it (and `message` and `delivery` from each other), and nothing in
//! the domain imports from the store's callers.
//!
//! - the root, below everything: [`state`] (every state machine of the domain: endpoints, wakes,
//!   wake attempts, tasks, task attempts, goals), [`error`] (the domain's [`ConversationError`],
//!   which names those states), [`ids`] (each id's prefix), [`scope`] (the two scopes),
//!   [`bounds`] (every limit, documented);
//! - [`principal`]: communication principals (hashed subjects) and [`Caller`]; [`audit`]: the
//!   domain's audit log, which never holds content, keys or tokens; [`idempotency`]:
//!   principal-scoped replay of create and post operations; [`mcp_task`]: the MCP tasks a tool
//!   call was answered with, created with their work and ended in the commit that ends it, and
//!   [`mcp_call`]: those whose work is the host's own run of the tool, reported through the row;
//! - [`agent`]: `agt_…` identities with a revision-checked Agent Card; [`endpoint`]:
//!   principal-bound attachments with controller generations and leases (the record), and
//!   `admission`: what may act through one;
//! - [`wake`]: coalesced wake intents; [`conversation`]: conversations, the human participant
//!   and agent participants;
//! - [`delegation`]: agent tasks and their fenced attempts, waits, goals and attention;
//! - [`attempt`]: wake delivery attempts and the dispatch fence (a wake whose delivery became
//!   unknown ends the task attempt it carried, in its transaction); [`dispatch`]: the
//!   carrier's operations over them (claim, prepare, finish, consume); [`app_carrier`]: the
//!   same for an MCP App View, the pull carrier (bind, acquire, prepare, finish, unbind, the
//!   expired-endpoint replacement); [`attachment`]: an
//!   endpoint's life (attach, renew, detach, retire: a retirement reconciles the wake and task
//!   attempts fenced to it, in its transaction);
//! - [`message`]: the append-only transcript and `post_message`; [`delivery`]: the
//!   per-recipient inbox; [`carrier`]: what a host carrier records around a turn (a turn's end in
//!   one transaction); [`bootstrap`]: an agent turn's bounded bootstrap, and explicit activation
//!   of a wake; [`reconcile`]: what a successor host runs at takeover; [`listing`]: the agent
//!   listing with each agent's readiness facts; [`operator`]: the operator's reads across every
//!   principal (the CLI's).
//!
//! The agent an `active` transfer becomes is bound to it by [`crate::binding`] (host-side), and
//! loses its turns when the transfer leaves `active`.
//!
//! Every operation is a method on [`Store`](crate::Store) taking the [`Caller`]: it checks the
//! scope, validates its input before any transaction, then runs one `BEGIN IMMEDIATE`
//! transaction (on the admitted write path, `Store::admitted`, which records an endpoint
//! expiry the operation met). Authorization is existence-hiding: lookups are scoped by principal and
//! authorized parent first, so a foreign id gets the same not-found error as a missing one.
//! Lifecycle strings read from the database parse into closed enums, and an unknown value fails
//! closed before any authorization decision is made on it.
//!
//! ```
//! use std::time::Duration;
//! use ahp_store::Store;
//! use ahp_store::conversation::*;
//! # fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
//! let mut store = Store::open_in_memory()?;
//! let alice = Caller::full("account:alice")?;
//! let card = AgentCard {
//!     handle: "forecaster".into(),
//!     display_name: "Forecaster".into(),
//!     description: String::new(),
//!     specialties: vec!["inventory".into()],
//! };
//! let agent = store.create_agent(&alice, &card, "create-1")?.value;
//! let cv = store
//!     .create_conversation(&alice, &NewConversation { title: "Q3".into(), agents: vec![agent.id.clone()] }, "cv-1")?
//!     .value;
//! let post = NewMessage {
//!     conversation: cv.id.clone(),
//!     acting: Acting::Human,
//!     body: "How much stock for Q3?".into(),
//!     reply_to: None,
//!     idempotency: IdempotencyKey::Key("post-1".into()),
//! };
//! let first = store.post_message(&alice, &post)?;
//! assert_eq!(first.value.seq, 1);
//! // An exact retry returns the same message and changes nothing.
//! let again = store.post_message(&alice, &post)?;
//! assert!(again.replayed && !again.state_changed);
//! assert_eq!(again.value.id, first.value.id);
//! // The agent, once attached, finds it in its inbox.
//! let ep = store.attach_endpoint(&alice, &agent.id, Duration::from_secs(60), "attach-1")?.value;
//! let inbox = store.read_inbox(&alice, &AgentActor::of(&ep), 0, 10, true)?;
//! assert_eq!(inbox.len(), 1);
//! # Ok(()) }
//! ```

// A closed lifecycle enum: its storage names, `Display`, and a `FromStr` that refuses (fails
// closed on) any name this build does not know.
macro_rules! closed_enum {
    ($(#[$m:meta])* $name:ident, $what:literal, { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vm])* $v),+ }

        impl $name {
            /// Every state.
            pub const ALL: &'static [$name] = &[$(Self::$v),+];

            /// The stored and serialized name.
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|st| st.as_str() == s)
                    .ok_or_else(|| format!(concat!("unknown ", $what, " {:?}"), s))
            }
        }
    };
}

pub(crate) mod admission;
pub mod agent;
pub mod app_carrier;
pub mod attachment;
pub mod attempt;
pub mod audit;
pub mod bootstrap;
pub mod bounds;
pub mod carried_leases;
pub mod carrier;
// The domain is named after its central concept; `conversation::conversation` is that concept.
#[allow(clippy::module_inception)]
pub mod conversation;
pub mod delegation;
pub mod delivery;
pub mod dispatch;
pub mod endpoint;
pub mod error;
pub mod idempotency;
pub mod ids;
pub mod listing;
pub mod mcp_call;
pub mod mcp_task;
pub mod message;
pub mod operator;
pub mod principal;
pub mod reconcile;
pub mod scope;
pub mod state;
pub mod wake;
pub(crate) mod woken;

#[cfg(test)]
mod tests;

use crate::clock::Timestamp;

pub use agent::{Agent, AgentCard};
pub use app_carrier::{
    APP_BINDING_PREFIX, AppAcquire, AppBindOutcome, AppBinding, AppBindingHolder, AppCarrierState, AppView,
    EndpointRecovery, MAX_ACCEPTED_WAIT, MAX_WINDOW_KEY_BYTES,
};
pub use attempt::{DispatchOutcome, DispatchTicket, WakeAttempt, WakeClaim};
pub use audit::{AuditEvent, AuditKind};
pub use bootstrap::Bootstrap;
pub use carried_leases::{MAX_LEASE_RENEWALS, RenewedLeases};
pub use carrier::{TurnEnd, TurnInbox, TurnSpend};
pub use conversation::{Acting, Conversation, ConversationState, NewConversation};
pub use delivery::{Delivery, DeliveryState};
pub use endpoint::{AgentActor, Endpoint};
pub use error::{ConversationError, ConversationResult};
pub use idempotency::{IdempotencyKey, Mutation};
pub use ids::{
    AGENT_ID_PREFIX, ATTEMPT_ID_PREFIX, CONVERSATION_ID_PREFIX, ENDPOINT_ID_PREFIX, MESSAGE_ID_PREFIX, WAKE_ID_PREFIX,
};
pub use listing::AgentListing;
pub use message::{Author, NewMessage, Posted, TranscriptMessage};
pub use principal::{Caller, CallerKind, CommunicationPrincipal, OPERATOR_SUBJECT};
pub use reconcile::ReconcileReport;
pub use scope::Scope;
pub use state::{AttemptEvent, AttemptState, EndpointState, WakeEvent, WakeState};
pub use wake::{Wake, WakeCause, WakeOrigin};

impl crate::Store {
    /// Starts a write transaction for a conversation operation ([`Store::begin`](crate::Store)
    /// with [`Begin::Write`](ahp_store_sql::Begin)), reading the clock once the lock is held: a
    /// deadline is judged at the moment the operation can act on it, and `created_at` never
    /// runs backwards against the order of commits.
    pub(crate) fn begin_immediate(&mut self) -> ConversationResult<(ahp_store_sql::Transaction<'_>, Timestamp)> {
        Ok(self.begin(ahp_store_sql::Begin::Write)?)
    }

    /// Starts a read transaction, so that a read's several statements see one snapshot, and
    /// reads the clock. It is rolled back when dropped (a lazily recorded expiry is written by
    /// its own transaction).
    pub(crate) fn begin_read(&mut self) -> ConversationResult<(ahp_store_sql::Transaction<'_>, Timestamp)> {
        Ok(self.begin(ahp_store_sql::Begin::Read)?)
    }
}
