//! The one wasmtime `Engine` of a host, how it is configured, and the epoch ticker.
//!
//! Choices, and why (figures in `BENCHMARKS.md`):
//! - **Fuel always on** — CPU is metered and capped per turn; costs 0–2 % on loops, more on
//!   call-heavy code, and is bit-exact run to run, so the same guest costs the same everywhere.
//! - **Epoch interruption** — the wall-clock ceiling while wasm runs. A ticker thread advances
//!   the epoch every [`EngineConfig::epoch_tick`]; each tick runs the Store's deadline
//!   callback, which also settles metering, so spend ticks by itself while a guest runs.
//! - **Async calls** — neither epochs nor fuel reach a guest waiting *in a host call* (a
//!   `wasi:io/poll`, a stream, an HTTP response). Guests are therefore called with
//!   `call_async` on a fiber (an async stack from the pool per running turn) and `wasi:io` and
//!   `wasi:http` are linked async, so such a wait is a pending future that the turn's
//!   wall-clock timeout drops (see `sandbox`).
//! - **`concurrency_support(false)`** — component-model async is not used, and leaving it on
//!   roughly doubles host↔guest call cost.
//! - **`max_wasm_stack`** — bounds guest recursion well inside the host thread's native stack;
//!   running out is a clean trap, not a crashed process.
//! - **Pooling allocator** — instance, memory and table slots are reserved once, sized by
//!   [`EngineConfig`]: `max_live_sandboxes` component instances, with
//!   [`CORE_INSTANCES_PER_SANDBOX`] core instances, [`TABLES_PER_SANDBOX`] tables and one
//!   memory of at most `max_memory_bytes` per sandbox in the pool. One component may take more
//!   of the pool, up to the largest tier's count ceilings ([`max_counts`]): the pool only
//!   refuses, at registration, a component no tier could run; whether *this* transfer's tier
//!   allows a component's counts is checked before each instantiation (see `counts`). Memory
//!   slots reserve `max_memory_bytes` plus a [`MEMORY_GUARD_BYTES`] guard of *address space*
//!   (not RAM), so bounds checks are explicit rather than elided by a 4 GiB reservation: that
//!   is what lets tens of thousands of sandboxes fit one process. The pool has one fiber stack
//!   per slot: a Store keeps the stack of its last call for the next, so every live sandbox
//!   holds one (wasmtime's default of 1,000 stacks stopped the 1,001st live sandbox).
//! - **No copy-on-write memory images** ([`EngineConfig::memory_image_cow`] off) — a CoW image
//!   splits a live slot's memory into four mappings (the guest's shadow stack, the image, the
//!   heap, the rest), a copied one into two; with the stack's two, a slot takes four, so
//!   15,000 live sandboxes fit the kernel's default `vm.max_map_count` (65,530). Measured on
//!   our guests: the same RSS and instantiation time either way (`host/benches/parked.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::Error;

/// Core instances one sandbox may need: a Rust guest built for `wasm32-wasip2` has its main
/// module plus a handful of adapter and shim instances.
pub const CORE_INSTANCES_PER_SANDBOX: u32 = 8;
/// Tables one sandbox may need (the guest's own and the component's shims).
pub const TABLES_PER_SANDBOX: u32 = 4;

/// The largest count ceilings of any tier — core instances, tables, memories — which are the
/// pool's per-component caps: a component over them can run on no tier.
pub const fn max_counts() -> (u32, u32, u32) {
    let mut i = 0;
    let (mut instances, mut tables, mut memories) = (0, 0, 0);
    while i < ahp_store::TIER_LIMITS.len() {
        let t = &ahp_store::TIER_LIMITS[i];
        if t.instances > instances {
            instances = t.instances;
        }
        if t.tables > tables {
            tables = t.tables;
        }
        if t.memories > memories {
            memories = t.memories;
        }
        i += 1;
    }
    (instances, tables, memories)
}

/// Guard region after each linear memory slot.
pub const MEMORY_GUARD_BYTES: u64 = 32 * 1024 * 1024;
/// Bytes of each memory slot kept resident (zeroed, not unmapped) when a sandbox is dropped,
/// so the next instantiation skips page faults for a small guest's stack and heap.
pub const KEEP_RESIDENT_BYTES: usize = 1024 * 1024;

/// How the host's engine is sized. Every field says what it bounds; the defaults fit the
/// development machine (2 vCPU, 24 GiB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// Most sandboxes alive at once (pool slots). Default 1,000.
    pub max_live_sandboxes: u32,
    /// Largest linear memory any sandbox may have: the largest tier's ceiling by default
    /// (2 GiB). A host serving only small tiers can lower it to pack more sandboxes.
    pub max_memory_bytes: u64,
    /// Most elements of any one table: the largest tier's ceiling by default.
    pub max_table_elements: u64,
    /// Epoch tick: the granularity of the wall-clock ceiling and of metering ticks. Default 5 ms.
    pub epoch_tick: Duration,
    /// Largest wasm call stack, in bytes. Default 512 KiB.
    pub max_wasm_stack: usize,
    /// Use the pooling allocator (default). Off, every instantiation maps fresh memory.
    pub pooling: bool,
    /// Map each sandbox's initial memory copy-on-write from the component's memory image
    /// instead of copying its data segments. Default off (see the [module docs](self)): two
    /// more memory mappings per live sandbox, for no gain measured on small guests.
    pub memory_image_cow: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let largest = ahp_store::TIER_LIMITS[ahp_store::TIER_LIMITS.len() - 1];
        Self {
            max_live_sandboxes: 1_000,
            max_memory_bytes: largest.memory_bytes,
            max_table_elements: largest.table_elements,
            epoch_tick: Duration::from_millis(5),
            max_wasm_stack: 512 * 1024,
            pooling: true,
            memory_image_cow: false,
        }
    }
}

/// Builds the engine `cfg` describes.
///
/// # Errors
///
/// [`Error::Wasmtime`] if wasmtime rejects the configuration (e.g. a pool too large to reserve).
pub fn build_engine(cfg: &EngineConfig) -> Result<Engine, Error> {
    let mut c = Config::new();
    c.wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .concurrency_support(false)
        .max_wasm_stack(cfg.max_wasm_stack)
        .memory_reservation(cfg.max_memory_bytes)
        .memory_guard_size(MEMORY_GUARD_BYTES)
        .memory_reservation_for_growth(0)
        .memory_init_cow(cfg.memory_image_cow);
    if cfg.pooling {
        let n = cfg.max_live_sandboxes;
        let (instances, tables, memories) = max_counts();
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(n)
            .total_core_instances(n.saturating_mul(CORE_INSTANCES_PER_SANDBOX))
            .total_memories(n)
            .total_stacks(n)
            .total_tables(n.saturating_mul(TABLES_PER_SANDBOX))
            .max_memory_size(usize::try_from(cfg.max_memory_bytes).unwrap_or(usize::MAX))
            .table_elements(usize::try_from(cfg.max_table_elements).unwrap_or(usize::MAX))
            .max_core_instances_per_component(instances)
            .max_tables_per_component(tables)
            .max_memories_per_component(memories)
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(64 * 1024)
            .pagemap_scan(Enabled::Auto);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&c).map_err(|e| Error::Wasmtime(format!("{e:#}")))
}

/// Advances an engine's epoch every tick on a background thread until dropped.
#[derive(Debug)]
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine, tick: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.weak();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ahp-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    match engine.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })
            .expect("spawn the epoch ticker thread");
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
