//! One host, assembled once: the shared database, the sandboxes (engine, compile cache,
//! vault, policy) and the agents this process carries ([`Agents`]). `ahp`, the tests and the
//! benchmarks all build it with [`HostBuilder`], so the wiring is written once.

use std::path::PathBuf;
use std::sync::Arc;

use ahp_store::StorePool;

use crate::agents::{Agents, AgentsConfig};
use crate::policy::Policy;
use crate::sandbox::engine::EngineConfig;
use crate::sandbox::{self, CeilingCap, SandboxConfig, Sandboxes};
use crate::shared_store::{SharedStore, share};
use crate::vault::{DirVault, Vault};

/// A host: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Host {
    store: SharedStore,
    sandboxes: Arc<Sandboxes>,
    agents: Arc<Agents>,
}

/// Builds a [`Host`].
pub struct HostBuilder {
    store: StorePool,
    sandbox: SandboxConfig,
    vault: Option<Arc<dyn Vault>>,
    agents: AgentsConfig,
}

impl HostBuilder {
    /// A host over `store` (a pool, or one [`Store`](ahp_store::Store) as a pool of one) whose
    /// data directory (`components/`, `compiled/`, and the vault unless [`vault`](Self::vault)
    /// says otherwise) is `data_dir`; empty policy, no cap.
    pub fn new(store: impl Into<StorePool>, data_dir: impl Into<PathBuf>) -> Self {
        Self {
            store: store.into(),
            sandbox: SandboxConfig::new(data_dir),
            vault: None,
            agents: AgentsConfig::default(),
        }
    }

    /// The operator's policy.
    #[must_use]
    pub fn policy(mut self, policy: Policy) -> Self {
        self.sandbox.policy = policy;
        self
    }

    /// Host-wide caps below the tiers' ceilings.
    #[must_use]
    pub fn cap(mut self, cap: CeilingCap) -> Self {
        self.sandbox.cap = cap;
        self
    }

    /// How the engine is sized.
    #[must_use]
    pub fn engine(mut self, configure: impl FnOnce(&mut EngineConfig)) -> Self {
        configure(&mut self.sandbox.engine);
        self
    }

    /// When idle agents' sandboxes are parked (see [`sandbox::park`]).
    #[must_use]
    pub fn parking(mut self, parking: sandbox::Parking) -> Self {
        self.sandbox.parking = parking;
        self
    }

    /// The vault (default: the directory `vault/` of the data directory).
    #[must_use]
    pub fn vault(mut self, vault: Arc<dyn Vault>) -> Self {
        self.vault = Some(vault);
        self
    }

    /// How the continuation controller is sized.
    #[must_use]
    pub fn agents(mut self, config: AgentsConfig) -> Self {
        self.agents = config;
        self
    }

    /// Opens the vault, builds the engine and linker, opens the compile cache and starts the
    /// epoch ticker. The controller's workers start with [`Agents::run_workers`].
    ///
    /// # Errors
    ///
    /// [`sandbox::Error::Io`] for a data directory or vault that cannot be created;
    /// [`sandbox::Error::Wasmtime`] for an engine configuration wasmtime refuses.
    pub fn build(self) -> Result<Host, sandbox::Error> {
        let vault = match self.vault {
            Some(v) => v,
            None => {
                let dir = self.sandbox.data_dir.join("vault");
                Arc::new(DirVault::open(&dir).map_err(|e| sandbox::Error::Io {
                    path: dir,
                    source: std::io::Error::other(e.to_string()),
                })?)
            }
        };
        let store = share(self.store);
        let sandboxes = Arc::new(Sandboxes::open(&self.sandbox, store.clone(), vault)?);
        let agents = Arc::new(Agents::new(store.clone(), sandboxes.clone(), self.agents));
        // The controller schedules the agents an agent's reply woke (weak: it owns the sandboxes).
        let carriers: std::sync::Weak<dyn crate::carrier::Carriers> = Arc::downgrade(&agents) as _;
        sandboxes.schedule_through(carriers);
        Ok(Host {
            store,
            sandboxes,
            agents,
        })
    }
}

impl Host {
    /// The database.
    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    /// The sandboxes.
    pub fn sandboxes(&self) -> &Arc<Sandboxes> {
        &self.sandboxes
    }

    /// The agents this process carries, and its controller.
    pub fn agents(&self) -> &Arc<Agents> {
        &self.agents
    }
}
