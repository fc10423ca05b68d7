//! Destination sandboxes: a transfer's agent running in a wasmtime component instance under
//! its tier's ceilings, metered against its budget.
//!
//! [`Sandboxes`] is one host's set of sandboxes. It owns the one [`wasmtime::Engine`] (see
//! [`engine`]), the compile cache ([`cache`]: no activation ever compiles), the component
//! registry (bytes on disk, records in the store), the vault, and the *live* sandboxes.
//!
//! **A turn executor, nothing more.** [`Sandboxes::prepare`] sets up a fresh sandbox for a
//! transfer (its Store, not yet instantiated); [`Sandboxes::run`] runs one turn of it — `resume`
//! or `turn` ([`Call`]) — under the tier's ceilings: it checks the component's core instances,
//! memories and tables ([`counts`]) before the first instantiation, instantiates from the cached
//! `InstancePre`, calls the guest, settles the meter, audits any `ceiling_exceeded` and reports
//! how the turn ended ([`TurnRun`]). What that means for the transfer — complete or fail an
//! activation, keep the sandbox or end the transfer — is decided by its callers:
//! `crate::activation` and `crate::agents`. A component built for `ahp:agent@0.2.0` takes
//! conversation turns; one built for `@0.1.0` only resumes.
//!
//! **Every wait ends with the turn.** A turn runs on wasmtime's async path under a timeout at
//! its wall-clock ceiling (see `run`): a guest spinning in wasm is trapped by the epoch
//! callback, a guest blocked in a host call (sleep, poll, a stream, HTTP) has its pending call
//! dropped, and either way the turn ends with `ceiling_exceeded(wall_clock_per_turn)` and
//! releases its thread. What the host holds for a guest outside its linear memory is bounded
//! by [`host_resources`].
//!
//! **Live sandboxes.** A resumed sandbox (its Store and instance) is kept in a map keyed by
//! transfer id ([`Sandboxes::keep`]), taken out for each later turn ([`Sandboxes::take`]) so no
//! lock is held while guest code executes and a second concurrent turn of the same transfer
//! finds none, and counted by [`Sandboxes::live_count`]. It is dropped by
//! [`Sandboxes::drop_sandbox`] — also while it is out for a turn: the map remembers the release
//! and the turn's `keep` then drops it instead of putting it back — and by
//! [`Sandboxes::drop_finished`] once its transfer left
//! `active` by a path the sandbox did not see (`ahp transfer terminate`, the reaper, an MCP
//! `report_usage`): `ahp serve` sweeps on every reaper tick.

#[doc(hidden)]
pub mod baseline;
pub mod cache;
pub mod counts;
pub mod egress;
pub mod engine;
pub mod host_resources;
mod instance;
pub mod limits;
pub(crate) mod meter;
pub(crate) mod pinned;
pub(crate) mod state;
mod sweep;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, Weak};

use ahp_store::{EventKind, Transfer};
use serde_json::json;
use wasmtime::component::Linker;
use wasmtime::{AsContextMut, Engine, Trap, UpdateDeadline};

use self::cache::{ComponentCache, Prepared};
pub use self::counts::ComponentCounts;
use self::engine::{EngineConfig, EpochTicker, build_engine};
use self::instance::{AgentInstance, AgentPre};
pub use self::limits::{Ceiling, CeilingCap, Ceilings};
pub use self::meter::{COMPUTE_KIND, FUEL_FLUSH_INTERVAL, METER_QUANTUM_FUEL};
pub use self::state::MAX_GUEST_LOG_BYTES;
use self::state::SandboxState;
use crate::carrier::Carriers;
use crate::interfaces::TurnCtx;
pub use crate::interfaces::context::{
    MAX_BUDGET_CALLS_PER_TURN, MAX_CONSUMES_PER_TURN, MAX_LOADS_PER_TURN, MAX_READS_PER_TURN, MAX_REPORTS_PER_TURN,
    MAX_RESOLUTIONS_PER_TURN, MAX_SAVES_PER_TURN,
};
use crate::policy::Policy;
use crate::shared_store::{SharedStore, StoreLock};
use crate::vault::Vault;

/// Longest guest-supplied message kept in a failure reason, in bytes.
pub const MAX_GUEST_MESSAGE_BYTES: usize = 512;

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
    /// No live sandbox for this transfer (never activated here, dropped, or mid-turn).
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

/// What a turn calls in the guest.
#[derive(Debug, Clone)]
pub enum Call {
    /// `resume`: activation (and, for tests and the benches, a repeated resume).
    Resume,
    /// `turn`: a conversation turn for a dispatched wake.
    Turn(Box<TurnCtx>),
}

impl From<ahp_store::conversation::ConversationError> for Error {
    fn from(e: ahp_store::conversation::ConversationError) -> Self {
        Self::Store(e.into())
    }
}

/// How one guest turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The guest's `resume` (or `turn`) returned `Ok`.
    Resumed,
    /// The guest's `resume` (or `turn`) returned an error; the guest's message (bounded).
    ResumeFailed(String),
    /// The guest broke a ceiling and was stopped.
    CeilingExceeded(Ceiling),
    /// The guest ran out of budget (not of its per-turn ceiling) and was stopped.
    BudgetExhausted,
    /// The guest trapped for another reason (a panic, an out-of-bounds access, …).
    Trapped(String),
    /// The host stopped the guest: the store refused its spend (e.g. the transfer was
    /// terminated while it ran).
    Stopped(String),
}

impl TurnOutcome {
    /// The reason recorded by `fail_activation`, or `None` for [`TurnOutcome::Resumed`].
    pub fn failure_reason(&self) -> Option<String> {
        match self {
            Self::Resumed => None,
            Self::ResumeFailed(m) => Some(format!("resume returned an error: {m}")),
            Self::CeilingExceeded(c) => Some(format!("ceiling exceeded: {c}")),
            Self::BudgetExhausted => Some("budget exhausted: the guest used all the fuel its budget pays for".into()),
            Self::Trapped(m) => Some(format!("guest trapped: {m}")),
            Self::Stopped(m) => Some(format!("stopped by the host: {m}")),
        }
    }
}

/// What one turn did in its sandbox.
#[derive(Debug, Clone)]
pub struct TurnRun {
    /// How the turn ended.
    pub outcome: TurnOutcome,
    /// Fuel the turn burnt.
    pub fuel_consumed: u64,
    /// Compute spend recorded over the sandbox's life so far, micro-USD.
    pub compute_micro_usd: u64,
    /// Time the turn spent in the database.
    pub store_time: std::time::Duration,
}

impl TurnRun {
    /// The report of this turn, which left `transfer`.
    pub fn report(self, transfer: Transfer) -> TurnReport {
        TurnReport {
            transfer,
            outcome: self.outcome,
            fuel_consumed: self.fuel_consumed,
            compute_micro_usd: self.compute_micro_usd,
            store_time: self.store_time,
        }
    }
}

/// What one turn did, and the transfer it left.
#[derive(Debug, Clone)]
pub struct TurnReport {
    /// The transfer after the turn (e.g. `active`, `pushed` after a failed activation,
    /// `insolvent`).
    pub transfer: Transfer,
    /// How the turn ended.
    pub outcome: TurnOutcome,
    /// Fuel the turn burnt.
    pub fuel_consumed: u64,
    /// Compute spend recorded over the sandbox's life so far, micro-USD.
    pub compute_micro_usd: u64,
    /// Time the turn spent in the database (its reads and commits, lock waits included):
    /// the rest of a turn's time is the sandbox's own.
    pub store_time: std::time::Duration,
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
}

impl SandboxConfig {
    /// Defaults for a host whose data directory is `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            engine: EngineConfig::default(),
            cap: CeilingCap::default(),
            policy: Policy::default(),
        }
    }
}

/// One transfer's sandbox: its wasmtime Store, and its instance once the first turn made it.
pub struct Sandbox {
    store: wasmtime::Store<SandboxState>,
    pre: AgentPre,
    /// What instantiating `pre` creates, checked against the ceilings before it is.
    counts: ComponentCounts,
    agent: Option<AgentInstance>,
    egress_audited: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("transfer", &self.transfer())
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// The transfer it continues.
    pub fn transfer(&self) -> &str {
        self.store.data().transfer()
    }

    /// Whether its component exports `turn` (built for `ahp:agent@0.2.0`).
    pub fn takes_turns(&self) -> bool {
        self.pre.takes_turns()
    }

    /// What the guest wrote to stdout and stderr (bounded by [`MAX_GUEST_LOG_BYTES`]).
    pub fn guest_log(&self) -> String {
        String::from_utf8_lossy(&self.store.data().log.contents()).into_owned()
    }
}

/// The live sandboxes of a host, and the transfers whose sandbox is out of the map for a turn.
#[derive(Default)]
struct Live {
    /// Sandboxes waiting for their transfer's next turn, keyed by transfer id.
    idle: HashMap<String, Sandbox>,
    /// Transfers whose sandbox is out for a turn, and whether it was released meanwhile (then
    /// it is dropped when the turn ends, not kept).
    running: HashMap<String, bool>,
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
    /// ([`crate::posting`]). Set once; a later call is ignored. Without it replies schedule
    /// nobody (a host without a controller).
    pub fn schedule_through(&self, carriers: Weak<dyn Carriers>) {
        let _ = self.carriers.set(carriers);
    }

    /// The engine every sandbox of this host runs on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The database this host records into.
    pub fn db(&self) -> MutexGuard<'_, ahp_store::Store> {
        self.store.locked()
    }

    /// The shared handle of the database this host records into.
    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    /// How many components this host has compiled since it started. Activations never
    /// compile: only registration (or a cache miss on disk) does.
    pub fn compiles(&self) -> u64 {
        self.cache.compiles()
    }

    /// How many sandboxes are live (resumed and kept for later turns; a sandbox out for a turn
    /// is not counted).
    pub fn live_count(&self) -> usize {
        self.live().idle.len()
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
        Ok(self.db().register_component(&digest, name, bytes.len() as u64)?)
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

    /// Sets up a fresh sandbox for `t` (not yet instantiated: its first [`run`](Self::run)
    /// instantiates it).
    ///
    /// # Errors
    ///
    /// [`Error::NotProvisioned`], [`Error::UnknownComponent`], [`Error::InvalidComponent`],
    /// [`Error::Store`] if the snapshot cannot be read.
    pub fn prepare(&self, t: &Transfer) -> Result<Sandbox, Error> {
        let (tier, component) = t
            .tier
            .zip(t.component.as_deref())
            .ok_or_else(|| Error::NotProvisioned(t.id.clone()))?;
        let (snapshot, record) = {
            let db = self.db();
            (db.snapshot(&t.id)?, db.component(component)?)
        };
        let record = record.ok_or_else(|| Error::UnknownComponent(component.to_owned()))?;
        let Prepared { pre, counts } = self.cache.prepared(&record.digest)?;
        let limits = tier.limits();
        let ceilings = self.cap.tighten(limits);
        let grants = Arc::new(self.policy().grants(&snapshot.mcp_config));
        let mut state = SandboxState::new(
            t.id.clone(),
            Arc::new(snapshot),
            limits,
            ceilings,
            grants,
            self.store.clone(),
            self.vault.clone(),
        );
        if let Some(carriers) = self.carriers.get() {
            state.agent.carriers = carriers.clone();
        }
        let mut store = wasmtime::Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Hand fuel out an interval at a time, so that the fuel burnt reaches the Store even in
        // a call-free loop: what the epoch callback, the settlements and a wall-clock trap see.
        store
            .fuel_async_yield_interval(Some(meter::FUEL_FLUSH_INTERVAL))
            .map_err(|e| Error::Wasmtime(format!("{e:#}")))?;
        store.epoch_deadline_callback(|mut cx| {
            let st = cx.data();
            if st.turn_started.elapsed() > st.ceilings.wall_clock_per_turn {
                cx.data_mut().limiter.breach = Some(Ceiling::WallClock);
                // Charge what the guest burnt before trapping it (the turn settles again after).
                meter::settle(&mut cx)?;
                return Err(wasmtime::format_err!("wall-clock ceiling reached"));
            }
            if meter::unsettled(&cx) >= METER_QUANTUM_FUEL {
                meter::settle(&mut cx)?;
            }
            Ok(UpdateDeadline::Continue(1))
        });
        Ok(Sandbox {
            store,
            pre,
            counts,
            agent: None,
            egress_audited: Default::default(),
        })
    }

    /// Runs one turn of `sandbox`: `call` under the tier's ceilings, metered against the
    /// budget, its ceiling breaches audited in the transfer's log. Knows nothing of the
    /// transfer's lifecycle: what the outcome means for it is the caller's (`activation`,
    /// `agents`).
    pub fn run(&self, sandbox: &mut Sandbox, call: Call) -> TurnRun {
        let (outcome, fuel) = run(sandbox, call);
        self.audit_ceiling(sandbox, &outcome);
        sandbox.store.data_mut().agent.turn = None;
        let st = sandbox.store.data();
        TurnRun {
            outcome,
            fuel_consumed: fuel,
            compute_micro_usd: st.meter.charged_micro_usd,
            store_time: st.agent.store_time.get(),
        }
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
            .db()
            .component(component)?
            .ok_or_else(|| Error::UnknownComponent(component.to_owned()))?;
        Ok(self.cache.prepared(&record.digest)?.pre.takes_turns())
    }

    /// Keeps `sandbox` live for later turns of its transfer (replacing any other of it) —
    /// unless it was taken out for a turn ([`take`](Self::take), [`reserve`](Self::reserve))
    /// and released ([`drop_sandbox`](Self::drop_sandbox)) while that turn ran: then it is
    /// dropped, so a release mid-turn is never undone. Returns whether it was kept.
    pub fn keep(&self, sandbox: Sandbox) -> bool {
        let transfer = sandbox.transfer().to_owned();
        let mut live = self.live();
        if live.running.remove(&transfer) == Some(true) {
            drop(live);
            tracing::info!(%transfer, "not keeping a sandbox released during its turn");
            return false;
        }
        live.idle.insert(transfer, sandbox);
        true
    }

    /// Takes the live sandbox of `transfer` out of the map for a turn (`None` if there is none,
    /// or a turn of it is running). Until the turn ends with [`keep`](Self::keep) or
    /// [`end_turn`](Self::end_turn), a [`drop_sandbox`](Self::drop_sandbox) of it is remembered.
    pub fn take(&self, transfer: &str) -> Option<Sandbox> {
        let mut live = self.live();
        let sandbox = live.idle.remove(transfer)?;
        live.running.insert(transfer.to_owned(), false);
        Some(sandbox)
    }

    /// Marks a turn of `transfer` as running in a sandbox set up fresh for it (none was live):
    /// as [`take`](Self::take) does for a live one. Returns `false` if a sandbox of it is live
    /// or out for a turn already.
    pub fn reserve(&self, transfer: &str) -> bool {
        let mut live = self.live();
        if live.idle.contains_key(transfer) || live.running.contains_key(transfer) {
            return false;
        }
        live.running.insert(transfer.to_owned(), false);
        true
    }

    /// Ends a turn of `transfer` whose sandbox is not kept (it was dropped, or never set up).
    pub fn end_turn(&self, transfer: &str) {
        self.live().running.remove(transfer);
    }

    /// The live sandboxes (a panic elsewhere leaves the map usable).
    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.locked()
    }

    /// Drops the live sandbox of `transfer` (its Store, instance and pool slot); one out for a
    /// turn is dropped when its turn ends instead of being kept. Returns whether there was one.
    pub fn drop_sandbox(&self, transfer: &str) -> bool {
        let mut live = self.live();
        if live.idle.remove(transfer).is_some() {
            return true;
        }
        match live.running.get_mut(transfer) {
            Some(released) => {
                *released = true;
                true
            }
            None => false,
        }
    }

    /// What the live sandbox of `transfer` wrote to stdout and stderr (bounded by
    /// [`MAX_GUEST_LOG_BYTES`]).
    pub fn guest_log(&self, transfer: &str) -> Option<String> {
        self.live().idle.get(transfer).map(Sandbox::guest_log)
    }

    /// Instantiates and resumes a sandbox for `transfer` without any activation bookkeeping,
    /// then drops it: the warm path the benchmarks measure (the transfer must have a budget).
    /// Returns how the turn ended and the time it spent in the database.
    ///
    /// # Errors
    ///
    /// As the setup half of [`activate`](Self::activate).
    #[doc(hidden)]
    pub fn trial_resume(&self, transfer: &Transfer) -> Result<(TurnOutcome, std::time::Duration), Error> {
        let mut sandbox = self.prepare(transfer)?;
        let outcome = run(&mut sandbox, Call::Resume).0;
        Ok((outcome, sandbox.store.data().agent.store_time.get()))
    }

    /// Forgets every in-memory `InstancePre` (the on-disk cache stays).
    #[doc(hidden)]
    pub fn forget_instance_pres(&self) {
        self.cache.forget_in_memory();
    }

    fn audit_ceiling(&self, sandbox: &Sandbox, outcome: &TurnOutcome) {
        let st = sandbox.store.data();
        // The egress ceiling cuts a request or response off without trapping the guest: audit
        // the first breach whatever the turn's outcome.
        if st.egress_meter.breached() && !sandbox.egress_audited.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.record_breach(sandbox, Ceiling::Egress);
        }
        let TurnOutcome::CeilingExceeded(ceiling) = *outcome else {
            return;
        };
        self.record_breach(sandbox, ceiling);
    }

    fn record_breach(&self, sandbox: &Sandbox, ceiling: Ceiling) {
        let st = sandbox.store.data();
        let c = &st.ceilings;
        let limit = match ceiling {
            Ceiling::FuelPerTurn => json!(c.fuel_per_turn),
            Ceiling::Memory => json!(c.memory_bytes),
            Ceiling::TableElements => json!(c.table_elements),
            Ceiling::Instances => json!(c.instances),
            Ceiling::Tables => json!(c.tables),
            Ceiling::Memories => json!(c.memories),
            Ceiling::WallClock => json!(c.wall_clock_per_turn.as_millis() as u64),
            Ceiling::Stack => json!(null),
            Ceiling::Egress => json!(c.egress_bytes),
            Ceiling::HostResources => json!(host_resources::table_capacity(c)),
        };
        let mut detail = json!({ "ceiling": ceiling.as_str(), "tier": c.tier, "limit": limit });
        if ceiling == Ceiling::Egress {
            detail["usedBytes"] = json!(st.egress_meter.used());
        }
        if ceiling == Ceiling::HostResources {
            // The limit is in table entries; each may hold at most this many bytes.
            detail["entryBytes"] = json!(host_resources::MAX_ENTRY_BYTES);
        }
        // A count ceiling: how many the component creates (its static count, see `counts`).
        if let Some(count) = sandbox.counts.get(ceiling) {
            detail["componentCount"] = json!(count);
        }
        if let Err(e) = self
            .db()
            .record_event(st.transfer(), EventKind::CeilingExceeded, detail)
        {
            tracing::error!(transfer = %st.transfer(), error = %e, "could not audit a ceiling breach");
        }
    }
}

/// One turn: check the component's counts (before the first instantiation), fuel the Store,
/// instantiate if needed, call `resume` under the turn's wall-clock deadline, settle the meter,
/// classify.
///
/// The guest runs on wasmtime's async path, driven to completion on this thread
/// (`wasmtime_wasi::runtime::in_tokio`: the current tokio runtime's handle, e.g. inside
/// `spawn_blocking`, else wasmtime-wasi's own). Two things end a turn at its wall-clock
/// ceiling: while wasm runs, the epoch callback (see `prepare`) traps it; while the guest waits
/// in a host call (`wasi:io/poll`, what `std::thread::sleep` becomes, a stream, an HTTP
/// response), the call's future is pending and `timeout_at` drops it, which unwinds the guest
/// off its fiber and cancels the wait. Either way no host thread stays behind with the guest.
fn run(sandbox: &mut Sandbox, call: Call) -> (TurnOutcome, u64) {
    let store = &mut sandbox.store;
    let turn = match call {
        Call::Resume => None,
        Call::Turn(t) => Some(*t),
    };
    let is_turn = turn.is_some();
    store.data_mut().agent.start_turn(turn);
    if sandbox.agent.is_none()
        && let Some(ceiling) = sandbox.counts.breach(&store.data().ceilings)
    {
        store.data_mut().limiter.breach = Some(ceiling);
        return (TurnOutcome::CeilingExceeded(ceiling), 0);
    }
    let fuel = match meter::start_turn(&mut store.as_context_mut()) {
        Ok(f) => f,
        Err(e) => return (TurnOutcome::Trapped(format!("{e:#}")), 0),
    };
    if fuel == 0 {
        return (TurnOutcome::BudgetExhausted, 0);
    }
    store.set_epoch_deadline(1);
    let deadline = store.data().turn_started + store.data().ceilings.wall_clock_per_turn;
    let result = wasmtime_wasi::runtime::in_tokio(async {
        let timed = tokio::time::timeout_at(deadline.into(), call_guest(sandbox, is_turn)).await;
        match timed {
            Ok(result) => result,
            Err(_) => {
                sandbox.store.data_mut().limiter.breach = Some(Ceiling::WallClock);
                Err(wasmtime::format_err!(
                    "wall-clock ceiling reached while the guest waited in a host call"
                ))
            }
        }
    });
    let store = &mut sandbox.store;
    if let Err(e) = meter::settle(&mut store.as_context_mut()) {
        tracing::error!(error = %e, "settling the meter failed");
    }
    let st = store.data();
    let outcome = match result {
        Ok(Ok(())) => TurnOutcome::Resumed,
        Ok(Err(message)) => TurnOutcome::ResumeFailed(truncate(&message, MAX_GUEST_MESSAGE_BYTES)),
        Err(e) => {
            // The whole error, wasm backtrace included, is for the operator's log; the event
            // log and the tool error get one line (`one_line`).
            tracing::warn!(transfer = %st.transfer(), error = ?e, "guest stopped");
            if let Some(c) = st.limiter.breach {
                TurnOutcome::CeilingExceeded(c)
            } else if let Some(r) = &st.meter.refused {
                TurnOutcome::Stopped(r.clone())
            } else {
                match e.downcast_ref::<Trap>() {
                    Some(Trap::OutOfFuel) if st.meter.hit_ceiling() => {
                        TurnOutcome::CeilingExceeded(Ceiling::FuelPerTurn)
                    }
                    Some(Trap::OutOfFuel) => TurnOutcome::BudgetExhausted,
                    Some(Trap::StackOverflow) => TurnOutcome::CeilingExceeded(Ceiling::Stack),
                    Some(Trap::Interrupt) => TurnOutcome::CeilingExceeded(Ceiling::WallClock),
                    _ if host_resources::is_table_full(&e) => TurnOutcome::CeilingExceeded(Ceiling::HostResources),
                    _ => count_ceiling(&e).map_or_else(
                        || TurnOutcome::Trapped(truncate(&one_line(&e), MAX_GUEST_MESSAGE_BYTES)),
                        TurnOutcome::CeilingExceeded,
                    ),
                }
            }
        }
    };
    (outcome, st.meter.turn_consumed)
}

/// Instantiates the sandbox's component if this is its first turn, and calls `resume` (or
/// `turn`).
async fn call_guest(sandbox: &mut Sandbox, turn: bool) -> wasmtime::Result<Result<(), String>> {
    let store = &mut sandbox.store;
    let agent = match &sandbox.agent {
        Some(a) => a,
        None => sandbox.agent.insert(sandbox.pre.instantiate_async(&mut *store).await?),
    };
    if turn {
        agent.call_turn(&mut *store).await
    } else {
        agent.call_resume(&mut *store).await
    }
}

/// Instantiation refused by the limiter's counts (wasmtime reports them as errors, not traps).
///
/// A last resort, matched on wasmtime's message as its error has no type: the counts are
/// checked before instantiating ([`ComponentCounts::breach`]), exactly for memories and tables,
/// so only core instances that the static count cannot see (the adapter modules wasmtime adds
/// between composed components, see [`counts`]) can still reach the limiter.
fn count_ceiling(e: &wasmtime::Error) -> Option<Ceiling> {
    let msg = format!("{e:#}");
    if msg.contains("instance count too high") {
        Some(Ceiling::Instances)
    } else if msg.contains("table count too high") {
        Some(Ceiling::Tables)
    } else if msg.contains("memory count too high") {
        Some(Ceiling::Memories)
    } else {
        None
    }
}

/// One line saying why a guest call failed, without wasmtime's multi-line wasm backtrace: the
/// trap (e.g. `wasm trap: wasm \`unreachable\` instruction executed`) if there is one, else the
/// innermost cause's first line.
fn one_line(e: &wasmtime::Error) -> String {
    let line = match e.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => e.root_cause().to_string(),
    };
    let first = line.lines().next().unwrap_or("").trim();
    if first.is_empty() {
        "unknown failure".to_owned()
    } else {
        first.to_owned()
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A reason within the store's bound.
pub(crate) fn bounded(reason: &str) -> String {
    truncate(reason, ahp_store::lifecycle::MAX_REASON_BYTES - 4)
}
