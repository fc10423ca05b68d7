//! The raw-wasmtime baseline the benchmarks compare the sandbox against: the same component
//! and the same host functions, on an engine with wasmtime's default configuration (component
//! model on; no fuel, no epochs, no resource limiter, no pooling) and no activation
//! bookkeeping. Not a way to run guests in production: nothing here is bounded.

use std::sync::Arc;

use ahp_store::Transfer;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use super::instance::AgentPre;
use super::state::SandboxState;
use super::{Error, Sandboxes};
use crate::shared_store::StoreLock;

/// A component pre-instantiated on a default-configured engine.
pub struct RawRunner {
    engine: Engine,
    pre: AgentPre,
    make_state: Box<dyn Fn() -> SandboxState + Send + Sync>,
}

impl RawRunner {
    /// Compiles `wasm` on a default engine and prepares it to resume `transfer`, whose
    /// snapshot and budget come from `sandboxes`' store.
    ///
    /// # Errors
    ///
    /// If the component does not compile or link, or the transfer cannot be read.
    pub fn new(sandboxes: &Sandboxes, wasm: &[u8], transfer: &Transfer) -> Result<Self, Error> {
        let w = |e: wasmtime::Error| Error::Wasmtime(format!("{e:#}"));
        let mut config = Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).map_err(w)?;
        let mut linker = Linker::new(&engine);
        crate::interfaces::add_to_linker(&mut linker).map_err(w)?;
        let component = Component::new(&engine, wasm).map_err(w)?;
        let pre = AgentPre::new(linker.instantiate_pre(&component).map_err(w)?).map_err(w)?;
        let tier = transfer
            .tier
            .ok_or_else(|| Error::NotProvisioned(transfer.id.clone()))?;
        let snapshot = Arc::new(sandboxes.store.locked().snapshot(&transfer.id)?);
        let grants = Arc::new(sandboxes.policy().grants(&snapshot.mcp_config));
        let (db, vault, id) = (sandboxes.store.clone(), sandboxes.vault.clone(), transfer.id.clone());
        let make_state = Box::new(move || {
            SandboxState::new(
                id.clone(),
                snapshot.clone(),
                tier.limits(),
                *tier.limits(),
                grants.clone(),
                db.clone(),
                vault.clone(),
            )
        });
        Ok(Self {
            engine,
            pre,
            make_state,
        })
    }

    /// Instantiates, calls `resume`, drops the instance. Returns whether `resume` said Ok, and
    /// the time its host calls spent in the database.
    ///
    /// # Errors
    ///
    /// A trap or instantiation failure.
    pub fn run(&self) -> Result<(bool, std::time::Duration), Error> {
        let mut store = wasmtime::Store::new(&self.engine, (self.make_state)());
        // The same async call path as the sandbox's (its linker's `wasi:io` is async).
        let r = wasmtime_wasi::runtime::in_tokio(async {
            let agent = self.pre.instantiate_async(&mut store).await?;
            agent.call_resume(&mut store).await
        })
        .map_err(|e| Error::Wasmtime(format!("{e:#}")))?;
        Ok((r.is_ok(), store.data().agent.store_time.get()))
    }
}
