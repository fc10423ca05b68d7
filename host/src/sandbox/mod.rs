//! Destination sandboxes: a transfer's agent running in a wasmtime component instance under
//! its tier's ceilings, metered against its budget.
//!
//! [`Sandboxes`] is one host's set of sandboxes. It owns the one [`wasmtime::Engine`] (see
//! [`engine`]), the compile cache ([`cache`]: no activation ever compiles), the component
//! registry (bytes on disk, records in the store), the vault, and the *live* sandboxes.
//!
//! **A run executor, nothing more** (`run`). A *run* is one call of the guest ([`Call`]):
//! `resume` for an activation (`crate::activation`), `turn` for a conversation turn
//! (`crate::agents`). [`Sandboxes::prepare`] sets up a fresh sandbox for a transfer;
//! [`Sandboxes::run`] runs one call in it under the tier's ceilings and reports how it ended
//! ([`Run`]). What that means for the transfer — complete or fail an activation, keep the
//! sandbox or end the transfer — is decided by those callers. The run's audit (`audit`)
//! records its `ceiling_exceeded` events and words its failure. A component built for
//! `ahp:agent@0.2.0` takes conversation turns; one built for `@0.1.0` only resumes. The tiers'
//! per-turn ceilings (fuel, wall clock) bound every run, a `resume` included.
//!
//! **Every wait ends with the run.** A run goes on wasmtime's async path under a timeout at its
//! wall-clock ceiling: a guest spinning in wasm is trapped by the epoch callback, a guest
//! blocked in a host call (sleep, poll, a stream, HTTP) has its pending call dropped, and
//! either way the run ends with `ceiling_exceeded(wall_clock_per_turn)` and releases its
//! thread. What the host holds for a guest outside its linear memory is bounded by
//! [`host_resources`].
//!
//! **Live sandboxes** (`live`). A resumed sandbox (its Store and instance) is kept in a map
//! keyed by transfer id ([`Sandboxes::keep`]), taken out for each later run
//! ([`Sandboxes::take`]) so no lock is held while guest code executes and a second concurrent
//! run of the same transfer finds none, and counted by [`Sandboxes::live_count`]. It is dropped
//! by [`Sandboxes::drop_sandbox`] — also while it is out for a run: the map remembers the
//! release and the run's `keep` then drops it instead of putting it back — and by
//! [`Sandboxes::drop_finished`] once its transfer left `active` by a path the sandbox did not
//! see (`ahp transfer terminate`, the reaper, an MCP `report_usage`): `ahp serve` sweeps on
//! every reaper tick. A turn-taking agent's sandbox is also dropped when it has been idle long
//! enough or its slot is wanted ([`park`]): the agent is then *parked*, and its next turn starts
//! a fresh sandbox.

mod audit;
#[doc(hidden)]
pub mod baseline;
pub mod cache;
pub mod counts;
pub mod engine;
mod executor;
pub mod host_resources;
mod instance;
pub mod limits;
mod live;
pub(crate) mod meter;
pub mod park;
pub(crate) mod state;
mod sweep;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};

use ahp_store::Transfer;
use wasmtime::Engine;
use wasmtime::component::Linker;

pub use self::audit::MAX_GUEST_MESSAGE_BYTES;
pub(crate) use self::audit::bounded;
use self::cache::ComponentCache;
pub use self::counts::ComponentCounts;
use self::engine::{EngineConfig, EpochTicker, build_engine};
pub use self::executor::{
    Call, DIAGNOSIS_LOG_BYTES, Diagnosis, MAX_DIAGNOSIS_TRACE_BYTES, Run, RunOutcome, RunReport, Sandbox,
};
pub use self::limits::{Ceiling, CeilingCap, Ceilings};
use self::live::Live;
pub use self::meter::{COMPUTE_KIND, DeferredSpend, FUEL_FLUSH_INTERVAL, METER_QUANTUM_FUEL};
pub use self::park::Parking;
pub use self::state::MAX_GUEST_LOG_BYTES;
use crate::carrier::Carriers;
pub(crate) use crate::interfaces::context::HeldInbox;
pub use crate::interfaces::context::{
    MAX_BUDGET_CALLS_PER_TURN, MAX_CONSUMES_PER_TURN, MAX_LOADS_PER_TURN, MAX_READS_PER_TURN, MAX_REPORTS_PER_TURN,
    MAX_RESOLUTIONS_PER_TURN, MAX_SAVES_PER_TURN,
};
use crate::policy::Policy;
use crate::shared_store::{SharedStore, StoreLock};
use crate::vault::Vault;

/// Why a sandbox operation was refused before any guest code ran, or could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store refused (bad token, wrong state, unknown transfer, …) or failed.
    #[error(transparent)]
    Store(#[from] ahp_store::Error),
    /// The transfer names a component this host has not registered.
    #[error("component {0} is not registered on this host")]
    UnknownComponent(String),
    /// The transfer has no tier or component yet.
    #[error("transfer {0} has no tier and component; provision it first")]
    NotProvisioned(String),
    /// No live sandbox for this transfer (never activated here, dropped, or mid-run).
    #[error("no live sandbox for transfer {0}")]
    NoSandbox(String),
    /// The transfer's component was built for `ahp:agent@0.1.0`: it takes no conversation turns.
    #[error("transfer {0} runs a component built for ahp:agent@0.1.0, which takes no conversation turns")]
    NoTurns(String),
    /// The bytes are not a component this host can run.
    #[error("invalid component: {0}")]
    InvalidComponent(String),
    /// wasmtime refused the engine configuration or an instantiation setup.
    #[error("wasmtime: {0}")]
    Wasmtime(String),
    /// A file of the host's data directory could not be read or written.
    #[error("I/O on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

impl From<ahp_store::conversation::ConversationError> for Error {
    fn from(e: ahp_store::conversation::ConversationError) -> Self {
        Self::Store(e.into())
    }
}

/// Where and how a host keeps its sandboxes.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The host's data directory: `components/` and `compiled/` live under it.
    pub data_dir: PathBuf,
    /// How the engine is sized.
    pub engine: EngineConfig,
    /// Host-wide caps below the tiers' ceilings (none by default).
    pub cap: CeilingCap,
    /// The operator's credential and egress policy (empty by default: no server reachable,
    /// no credential usable). `ahp` reads it from the data directory.
    pub policy: Policy,
    /// When idle agents' sandboxes are parked (see [`park`]).
    pub parking: Parking,
}

impl SandboxConfig {
    /// Defaults for a host whose data directory is `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            engine: EngineConfig::default(),
            cap: CeilingCap::default(),
            policy: Policy::default(),
            parking: Parking::default(),
        }
    }
}

/// One host's sandboxes. See the [module docs](self).
pub struct Sandboxes {
    live: Mutex<Live>,
    cache: ComponentCache,
    store: SharedStore,
    vault: Arc<dyn Vault>,
    cap: CeilingCap,
    policy: RwLock<Arc<Policy>>,
    /// Whom a guest's reply schedules: set once by the host builder (see
    /// [`schedule_through`](Self::schedule_through)).
    carriers: OnceLock<Weak<dyn Carriers>>,
    parking: Parking,
    /// The engine's pool slots (unbounded without the pooling allocator).
    slots: usize,
    /// Sandboxes parked so far.
    parked: AtomicU64,
    engine: Engine,
    _ticker: EpochTicker,
}

impl std::fmt::Debug for Sandboxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandboxes")
            .field("live", &self.live_count())
            .field("compiles", &self.compiles())
            .finish_non_exhaustive()
    }
}

impl Sandboxes {
    /// Builds the engine and linker, opens the compile cache under `config.data_dir`, and
    /// starts the epoch ticker.
    ///
    /// # Errors
    ///
    /// [`Error::Wasmtime`] for an engine configuration wasmtime refuses; [`Error::Io`] if the
    /// data directory cannot be created.
    pub fn open(config: &SandboxConfig, store: SharedStore, vault: Arc<dyn Vault>) -> Result<Self, Error> {
        let engine = build_engine(&config.engine)?;
        let mut linker = Linker::new(&engine);
        crate::interfaces::add_to_linker(&mut linker).map_err(|e| Error::Wasmtime(format!("{e:#}")))?;
        let cache = ComponentCache::open(engine.clone(), Arc::new(linker), &config.data_dir)?;
        let ticker = EpochTicker::start(&engine, config.engine.epoch_tick);
        Ok(Self {
            live: Mutex::new(Live::default()),
            cache,
            store,
            vault,
            cap: config.cap,
            policy: RwLock::new(Arc::new(config.policy.clone())),
            carriers: OnceLock::new(),
            parking: config.parking,
            slots: if config.engine.pooling {
                config.engine.max_live_sandboxes as usize
            } else {
                usize::MAX
            },
            parked: AtomicU64::new(0),
            engine,
            _ticker: ticker,
        })
    }

    /// The operator's policy new sandboxes are granted from.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Replaces the operator's policy. Sandboxes set up from now on are granted from `policy`;
    /// live ones keep the grants they started with.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
    }

    /// Makes `carriers` (the host's controller) the scheduler of every sandbox set up from now
    /// on: an agent's `reply` schedules the agents it woke through it, as every other post does
    /// ([`crate::ops::posting`]). Set once; a later call is ignored. Without it replies schedule
    /// nobody (a host without a controller).
    pub fn schedule_through(&self, carriers: Weak<dyn Carriers>) {
        let _ = self.carriers.set(carriers);
    }

    /// The engine every sandbox of this host runs on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// How many components this host has compiled since it started. Activations never
    /// compile: only registration (or a cache miss on disk) does.
    pub fn compiles(&self) -> u64 {
        self.cache.compiles()
    }

    /// Registers a component: stores its bytes under their digest, compiles and caches it, and
    /// records it (with `name`, if given) in the store. Returns the record; its digest is what
    /// `provision_runtime` takes (the name works too).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidComponent`] for bytes that are empty, too large, not a component, or
    /// whose imports this host cannot satisfy; [`Error::Store`] for a bad name.
    pub fn register_component(&self, bytes: &[u8], name: Option<&str>) -> Result<ahp_store::ComponentRecord, Error> {
        if let Some(n) = name {
            // Check the name before spending a compile on the bytes.
            ahp_store::lifecycle::validate_component(n)?;
        }
        let digest = self.cache.add(bytes)?;
        let mut db = self.store.locked();
        let record = db.register_component(&digest, name, bytes.len() as u64)?;
        // The database keeps the bytes: another host sharing it loads the component from there.
        db.store_component_bytes(&digest, bytes)?;
        Ok(record)
    }

    /// The ready form of component `digest`: from this host's cache, else from the bytes the
    /// database keeps (registered on another host), added to the cache first.
    pub(crate) fn prepared(&self, digest: &str) -> Result<cache::Prepared, Error> {
        match self.cache.prepared(digest) {
            Err(Error::UnknownComponent(_)) => {
                let bytes = self.store.locked().component_bytes(digest)?;
                let bytes = bytes.ok_or_else(|| Error::UnknownComponent(digest.to_owned()))?;
                tracing::info!(%digest, "loading a component registered on another host");
                self.cache.add(&bytes)?;
                self.cache.prepared(digest)
            }
            other => other,
        }
    }

    /// [`register_component`](Self::register_component) for a file.
    ///
    /// # Errors
    ///
    /// As `register_component`, and [`Error::Io`] if the file cannot be read.
    pub fn register_component_file(
        &self,
        path: impl AsRef<Path>,
        name: Option<&str>,
    ) -> Result<ahp_store::ComponentRecord, Error> {
        let path = path.as_ref();
        let len = std::fs::metadata(path)
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        if len > ahp_store::MAX_COMPONENT_BYTES {
            return Err(Error::InvalidComponent(format!(
                "{} is {len} bytes; the limit is {}",
                path.display(),
                ahp_store::MAX_COMPONENT_BYTES
            )));
        }
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.register_component(&bytes, name)
    }

    /// Whether `t`'s component exports `turn` (built for `ahp:agent@0.2.0`).
    ///
    /// # Errors
    ///
    /// As [`prepare`](Self::prepare) for an unknown or invalid component.
    pub fn takes_turns(&self, t: &Transfer) -> Result<bool, Error> {
        let component = t
            .component
            .as_deref()
            .ok_or_else(|| Error::NotProvisioned(t.id.clone()))?;
        let record = self
            .store
            .locked()
            .component(component)?
            .ok_or_else(|| Error::UnknownComponent(component.to_owned()))?;
        Ok(self.prepared(&record.digest)?.pre.takes_turns())
    }

    /// Forgets every in-memory `InstancePre` (the on-disk cache stays).
    #[doc(hidden)]
    pub fn forget_instance_pres(&self) {
        self.cache.forget_in_memory();
    }
}
