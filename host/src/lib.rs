//! `ahp-host` — the ahp host: the `ahp` command today; the sandbox, vault, metering and MCP
//! server as their issues land. All state changes go through [`ahp_store`].

pub use ahp_store as store;
