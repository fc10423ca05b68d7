//! Host implementations of the `ahp:agent` WIT interfaces, one file per interface.
//!
//! Each file only *adapts*: it converts WIT types, applies the per-call bounds, calls the real
//! logic (the store, the vault, the meter) and maps its errors to the interface's `error`
//! variant. An ordinary guest mistake is a WIT error; a broken ceiling is a trap.

pub mod checkpoint;
pub mod credentials;
pub mod metering;
pub mod snapshot;

use wasmtime::component::{HasSelf, Linker};

use crate::sandbox::bindings::ahp::agent;
use crate::sandbox::state::SandboxState;

/// Adds the `ahp:agent` interfaces and WASI (no ambient authority, see
/// [`SandboxState`](crate::sandbox)) to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<SandboxState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    // Outgoing HTTP, through the sandbox's egress hooks (see `sandbox::egress`).
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(linker)?;
    agent::snapshot::add_to_linker::<_, HasSelf<SandboxState>>(linker, |s| s)?;
    agent::credentials::add_to_linker::<_, HasSelf<SandboxState>>(linker, |s| s)?;
    agent::checkpoint::add_to_linker::<_, HasSelf<SandboxState>>(linker, |s| s)?;
    metering::add_to_linker(linker)?;
    Ok(())
}
