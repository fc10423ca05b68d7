//! `ahp-host` — the ahp host: the `ahp` command, the destination sandboxes, the vault and
//! metering; the MCP server as its issue lands. All state changes go through [`ahp_store`].
//!
//! - [`sandbox`]: wasmtime sandboxes under tier ceilings, metered against the budget.
//! - [`interfaces`]: the host side of each `ahp:agent` WIT interface.
//! - [`vault`]: credential references to secrets.
//! - [`guests`]: paths of the example guest components built by `build.rs`.

pub use ahp_store as store;

pub mod interfaces;
pub mod sandbox;
pub mod vault;

/// The example guest components (`examples/`), compiled for `wasm32-wasip2` by `build.rs`.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}
