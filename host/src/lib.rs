//! `ahp-host` — the ahp host: `activate` around a destination, the MCP server, and (as its
//! issue lands) the wasmtime sandbox. All state changes go through [`ahp_store`].

pub mod activation;
pub mod error;
pub mod mcp;

pub use ahp_store as store;
pub use error::{Error, Result};
