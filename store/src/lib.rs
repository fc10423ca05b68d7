//! `ahp-store` — ahp's system of record.
//!
//! Plain synchronous Rust over one SQL seam ([`ahp_store_sql`]) with two backends — SQLite
//! ([`sqlite`], embedded, the default) and PostgreSQL (`ahp-store-postgres`): no async runtime, no wasmtime, no MCP. Every
//! state transition of a transfer lives here, so the MCP tools, the CLI, the sandbox and the
//! demo all call the same functions — there is one state machine, not three.
//!
//! - [`Store`] opens and migrates the database ([`db`]).
//! - Transfers: [`Store::snapshot_state`], [`Store::provision_runtime`], [`Store::push_state`],
//!   [`Store::begin_activation`] / [`Store::end_activation`] (completed or failed),
//!   [`Store::report_usage`], [`Store::get_status`], [`Store::terminate`], and the reapers
//!   [`Store::reap_insolvent`] and [`Store::reap_expired`]. The allowed edges are the pure
//!   function [`transition`].
//! - Ownership and the binding of a transfer to the agent it becomes: [`TransferOwner`],
//!   [`Store::snapshot_state_as`], [`Store::bind_transfer_agent`] ([`binding`]); leaving `active`
//!   unbinds the agent in the same transaction. A caller acts only on its own transfers
//!   ([`Store::get_status_as`], [`Store::push_state_as`], [`Store::report_client_usage_as`]):
//!   another's is refused exactly like a missing one.
//! - The durable conversation domain ([`conversation`]), and delegation over it ([`delegation`]):
//!   agent tasks and their fenced attempts, waits, goals and attention.
//! - The sandbox's durable state: the component registry ([`Store::register_component`]) and
//!   checkpoints ([`Store::save_checkpoint`]).
//! - Model calls, reserved before and settled after ([`model_call`]):
//!   [`Store::reserve_model_call`], [`Store::settle_model_call`].
//! - [`Tier`]s and their ceilings ([`TIER_LIMITS`]), [`Budget`]s in integer micro-USD,
//!   single-use transfer tokens ([`issue_transfer_token`]), the audit log ([`Event`]).
//!
//! ```
//! use ahp_store::*;
//! # fn main() -> Result<()> {
//! let key = TokenKey::random();
//! let mut store = Store::open_in_memory()?.with_token_key(key.clone());
//! let snapshot = SnapshotInput {
//!     source_host: "laptop".into(),
//!     system_prompt: "You forecast inventory.".into(),
//!     message_history: vec![Message { role: "user".into(), content: "hi".into() }],
//!     tool_state: serde_json::json!({}),
//!     mcp_config: vec![],
//! };
//! let t = store.snapshot_state(&snapshot)?;
//! let token = issue_transfer_token(&key, &t.id, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL)?;
//! let t = store.provision_runtime(&t.id, Tier::Nano, 1_000_000, "forecaster", &token)?;
//! assert_eq!(t.status, TransferStatus::Provisioned);
//! // A token is single-use.
//! assert!(matches!(
//!     store.provision_runtime(&t.id, Tier::Nano, 1_000_000, "forecaster", &token),
//!     Err(Error::InvalidTransition { .. })
//! ));
//! # Ok(()) }
//! ```

pub mod activation;
pub mod binding;
pub mod budget;
pub mod carried;
pub mod checkpoint;
pub mod clock;
pub mod component;
#[macro_use]
pub mod conversation;
/// Delegation, part of the conversation domain ([`conversation::delegation`]).
pub use conversation::delegation;
pub mod db;
pub mod error;
pub mod event;
#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod fault;
#[cfg(any(test, feature = "testing"))]
mod fault_plan;
pub mod group_commit;
pub mod hosts;
pub mod id;
pub mod input;
pub mod issuer;
pub mod lifecycle;
mod migrations;
pub mod model_call;
pub mod moves;
pub mod overview;
pub mod owner;
pub mod pool;
pub mod principal;
pub mod reap;
pub mod snapshot;
pub mod spend;
pub mod spend_curve;
pub mod sqlite;
pub mod state;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
pub mod tier;
pub mod token;
mod token_refusal;
pub mod transfer;
pub mod write_turns;

/// The SQL seam the store runs on (values, rows, the backend trait).
pub use ahp_store_sql as sql;

pub use activation::{ActivationEnd, ActivationWrite, ActivationWrites, Bind, MAX_ACTIVATION_WRITES};
pub use binding::{AgentBinding, ExaminedTransfers, MAX_EXAMINED_TRANSFERS};
pub use budget::{Budget, MAX_BUDGET_MICRO_USD, MAX_USAGE_REPORT_MICRO_USD};
pub use carried::CarriedAgent;
pub use checkpoint::Checkpoint;
pub use clock::{Clock, ManualClock, OffsetClock, SystemClock, Timestamp};
pub use component::{ComponentRecord, MAX_COMPONENT_BYTES, digest_of};
pub use conversation::OPERATOR_SUBJECT;
pub use db::{MAX_SERIALIZABLE_WRITE_ATTEMPTS, MAX_WRITE_ATTEMPTS, Store};
pub use error::{Error, Result};
pub use event::{DEFAULT_EVENT_PAGE_LIMIT, Event, EventKind, EventPage, EventsPage, MAX_EVENT_PAGE_LIMIT};
pub use group_commit::{GroupCommit, GroupCommitStats};
pub use hosts::{Host, HostClaim, HostLease, HostState};
pub use issuer::TokenIssuer;
pub use model_call::{
    CallOutcome, MIN_OUTPUT_TOKENS, ModelCall, ModelPrices, ModelReservation, ModelUsage, Reservation, ReservationPlan,
    ReservationRequest, Settlement, plan_reservation,
};
pub use overview::{SnapshotSummary, TransferSummary};
pub use owner::{API_KEY_SUBJECT_PREFIX, TransferOwner};
pub use pool::{DEFAULT_POOL_CONNECTIONS, MAX_POOL_CONNECTIONS, PooledStore, StorePool};
pub use principal::{ApiScope, Principal};
pub use reap::{DEFAULT_GRACE_PERIOD, DEFAULT_TRANSFER_TTL};
pub use snapshot::{McpServer, Message, SnapshotInput};
pub use spend::{
    COMPUTE_USAGE_KIND, DEFAULT_USAGE_KIND, HOST_METERED_USAGE_KINDS, HOST_RESERVED_USAGE_KINDS,
    MODEL_TOKENS_USAGE_KIND, TOOL_CALLS_USAGE_KIND, UsageReport,
};
pub use spend_curve::SpendSample;
pub use state::{Operation, Phase, TransferStatus, transition};
pub use tier::{FUEL_PER_CPU_SECOND, TIER_LIMITS, Tier, TierLimits};
pub use token::{
    Bound, DEFAULT_TOKEN_TTL, TokenBindings, TokenKey, TokenRefusal, TokenScope, issue_bound_transfer_token,
    issue_transfer_token,
};
pub use transfer::{Transfer, TransferStatusPage, TransferStatusReport};
pub use write_turns::WriteTurns;
