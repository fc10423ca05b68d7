//! `ahp-host` — the ahp host: the destination sandboxes, the vault and metering, `activate`,
//! the MCP server, and the `ahp` command. All state changes go through [`ahp_store`].
//!
//! - [`host`]: one host assembled once ([`host::HostBuilder`]): store, sandboxes, agents.
//! - [`activation`]: `activate`, from token to live agent.
//! - [`agents`]: the binding of an active transfer to its agent, and the continuation
//!   controller that runs its conversation turns.
//! - [`sandbox`]: the turn executor — wasmtime sandboxes under tier ceilings, metered against
//!   the budget.
//! - [`interfaces`]: the host side of each `ahp:agent` WIT interface, through [`interfaces::AgentCtx`].
//! - [`carrier`]: the readiness flag (which wake carriers this process holds) and the scheduler.
//! - [`ops`]: the operations every surface shares (transfers, conversations, delegation, who the
//!   caller is), among them [`ops::posting`], the one post path, which schedules the agents a post
//!   woke.
//! - [`shared_store`]: the one database handle and its lock policy.
//! - [`vault`]: credential references to secrets.
//! - [`policy`]: the operator's credential and egress policy, which snapshots can only narrow.
//! - [`mcp`]: the transfer and conversation tools over stdio and Streamable HTTP.
//! - [`console`]: the web console at `/console` (transfers, budgets, event logs, agents,
//!   conversations).
//! - [`guests`]: the demo's guest component, built by `build.rs` and embedded.

pub use ahp_store as store;

pub mod activation;
pub mod agents;
pub mod app_views;
pub mod carrier;
pub mod console;
pub mod egress;
pub mod error;
pub mod gateway;
pub mod host;
pub mod interfaces;
pub mod mcp;
pub mod ops;
pub mod policy;
pub mod sandbox;
pub mod scrub;
pub mod shared_store;
#[doc(hidden)]
pub mod testing;
pub mod tools;
pub mod vault;

pub use error::{Error, Result};

/// The guest component the demo runs (`examples/assistant`), compiled for `wasm32-wasip2` by
/// `build.rs` and embedded. The tests' guests are the `ahp-guests` crate's.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}
