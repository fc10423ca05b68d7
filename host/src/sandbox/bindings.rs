//! Host-side bindings generated from `wit/` (world `ahp:agent/agent`).
//!
//! Only types and glue live here; each interface's host behaviour is in
//! `crate::interfaces::<interface>`. The export `resume` is called asynchronously (its turn
//! runs under a wall-clock timeout, see `sandbox`); the `ahp:agent` imports are plain
//! synchronous host functions.

#![allow(missing_docs, unreachable_pub, clippy::all)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "ahp:agent/agent",
    exports: { default: async },
});
