//! Host-side bindings generated from `wit/` (world `ahp:agent/agent`).
//!
//! Only types and glue live here; each interface's host behaviour is in
//! `crate::interfaces::<interface>`.

#![allow(missing_docs, unreachable_pub, clippy::all)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "ahp:agent/agent",
});
