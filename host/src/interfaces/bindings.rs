//! Host-side bindings generated from `wit/`: the current world `ahp:agent/agent@0.3.0`
//! ([`v0_3`]) and the frozen `ahp:agent/agent@0.2.0` ([`v0_2`], `wit/v0.2.0/`) and
//! `ahp:agent/agent@0.1.0` ([`v0_1`], `wit/v0.1.0/`), whose components keep working.
//!
//! Only types and glue live here; each interface's host behaviour is in its own file of
//! [`interfaces`](super). The exports (`resume`, `turn`) are called asynchronously (a turn runs
//! under a wall-clock timeout, see `sandbox`); the `ahp:agent` imports are plain synchronous
//! host functions, except those that wait on the network (`model`, `tools`), which are linked by
//! hand as async functions (they settle the CPU meter around their charges), so that the turn's
//! wall clock drops a waiting call.

#![allow(missing_docs, unreachable_pub, clippy::all)]

/// `ahp:agent@0.3.0`: activation, conversation turns, the model gateway, MCP tools and
/// delegation.
pub mod v0_3 {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "ahp:agent/agent",
        exports: { default: async },
    });
}

/// `ahp:agent@0.2.0`: activation and conversation turns.
pub mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.2.0",
        world: "ahp:agent/agent",
        exports: { default: async },
    });
}

/// `ahp:agent@0.1.0`: activation only.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "ahp:agent/agent",
        exports: { default: async },
    });
}
