//! What one sandbox's wasmtime `Store` carries: the guest's WASI context (no ambient
//! authority), its limiter, its transfer's snapshot and allow-lists, its meter, and handles to
//! the database and vault its host functions use.

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ahp_store::{SnapshotInput, TierLimits};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::egress::{CredentialSource, EgressHooks, EgressMeter};
use super::host_resources;
use super::limits::{Ceilings, Limiter};
use super::meter::Meter;
use crate::policy::Grants;
use crate::vault::Vault;

/// Most bytes a sandbox may write to stdout and stderr together over its life; past it a
/// write fails (a Rust guest's `println!` then panics). Guest logs are diagnostics, not data.
pub const MAX_GUEST_LOG_BYTES: usize = 256 * 1024;

/// Per-turn bounds on host calls that write to the database, so a guest cannot turn cheap
/// calls into an unbounded stream of durable writes (each is an fsync).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TurnCalls {
    pub(crate) resolutions: u32,
    pub(crate) reports: u32,
    pub(crate) saves: u32,
}

/// Credential resolutions one turn may make.
pub const MAX_RESOLUTIONS_PER_TURN: u32 = 64;
/// `metering.report` calls one turn may make.
pub const MAX_REPORTS_PER_TURN: u32 = 256;
/// Checkpoint saves one turn may make.
pub const MAX_SAVES_PER_TURN: u32 = 64;

/// The data of one sandbox's `wasmtime::Store`.
pub(crate) struct SandboxState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    egress: EgressHooks,
    pub(crate) egress_meter: Arc<EgressMeter>,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) ceilings: Ceilings,
    pub(crate) limits: &'static TierLimits,
    pub(crate) transfer: String,
    pub(crate) snapshot: Arc<SnapshotInput>,
    /// What the operator's policy, narrowed by the snapshot, lets this guest reach and use.
    pub(crate) grants: Arc<Grants>,
    pub(crate) db: Arc<Mutex<ahp_store::Store>>,
    pub(crate) vault: Arc<dyn Vault>,
    pub(crate) meter: Meter,
    pub(crate) calls: TurnCalls,
    pub(crate) turn_started: Instant,
    /// Time this turn spent in the database (reads and commits), reset by `meter::start_turn`.
    pub(crate) store_time: Cell<Duration>,
    pub(crate) log: MemoryOutputPipe,
}

impl SandboxState {
    pub(crate) fn new(
        transfer: String,
        snapshot: Arc<SnapshotInput>,
        limits: &'static TierLimits,
        ceilings: Ceilings,
        grants: Arc<Grants>,
        db: Arc<Mutex<ahp_store::Store>>,
        vault: Arc<dyn Vault>,
    ) -> Self {
        let log = MemoryOutputPipe::new(MAX_GUEST_LOG_BYTES);
        // Defaults of WasiCtxBuilder: no args, no environment, no preopens, stdin empty. The
        // sockets and filesystem interfaces are not even linked (`interfaces::wasi`); sockets
        // and name lookup are refused here too, should that ever change.
        let wasi = WasiCtxBuilder::new()
            .stdout(log.clone())
            .stderr(log.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        let egress_meter = Arc::new(EgressMeter::new(ceilings.egress_bytes));
        let egress = EgressHooks::new(
            grants.clone(),
            egress_meter.clone(),
            ceilings.wall_clock_per_turn,
            Some(CredentialSource {
                vault: vault.clone(),
                db: db.clone(),
                transfer: transfer.clone(),
            }),
        );
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(host_resources::FIELD_SIZE_LIMIT);
        let mut table = ResourceTable::new();
        table.set_max_capacity(host_resources::table_capacity(&ceilings));
        Self {
            wasi,
            http,
            egress,
            egress_meter,
            table,
            limiter: Limiter::new(ceilings),
            ceilings,
            limits,
            transfer,
            snapshot,
            grants,
            db,
            vault,
            meter: Meter::new(ceilings.fuel_per_turn),
            calls: TurnCalls::default(),
            turn_started: Instant::now(),
            store_time: Cell::new(Duration::ZERO),
            log,
        }
    }

    /// Runs `f` on the database, recovering the lock if a previous holder panicked (the store's
    /// own transactions keep it consistent).
    /// The time spent (lock wait included) is added to [`store_time`](Self::store_time).
    pub(crate) fn db<R>(&self, f: impl FnOnce(&mut ahp_store::Store) -> R) -> R {
        let started = Instant::now();
        let result = {
            let mut guard = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut guard)
        };
        self.store_time.set(self.store_time.get() + started.elapsed());
        result
    }
}

impl WasiHttpView for SandboxState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

impl WasiView for SandboxState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! A `SandboxState` for a real provisioned transfer, for the interfaces' unit tests.

    use super::*;
    use ahp_store::{
        DEFAULT_TOKEN_TTL, McpServer, Message, SnapshotInput, Store, Tier, TokenKey, TokenScope, issue_transfer_token,
    };

    pub(crate) fn state(messages: usize, tier: Tier) -> (SandboxState, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let key = TokenKey::random();
        let mut db = Store::open_in_memory().unwrap().with_token_key(key.clone());
        let snap = SnapshotInput {
            source_host: "laptop".into(),
            system_prompt: "p".into(),
            message_history: (0..messages)
                .map(|i| Message {
                    role: "user".into(),
                    content: format!("m{i}"),
                })
                .collect(),
            tool_state: serde_json::json!({ "k": 1 }),
            mcp_config: vec![McpServer {
                server: "https://inventory.example.com/mcp".into(),
                cred_ref: "inventory-api".into(),
            }],
        };
        let t = db.snapshot_state(&snap).unwrap();
        let tok = issue_transfer_token(&key, &t.id, TokenScope::ProvisionRuntime, db.now(), DEFAULT_TOKEN_TTL).unwrap();
        db.provision_runtime(&t.id, tier, 1_000, "forecaster", &tok).unwrap();
        let vault = crate::vault::DirVault::open(dir.path().join("vault")).unwrap();
        // The operator binds (and reveals) inventory-api to the inventory server, and binds
        // `unrevealed` to another server the snapshot does not list.
        let policy: crate::policy::Policy = serde_json::from_value(serde_json::json!({ "servers": [
            { "server": "https://inventory.example.com",
              "credential": { "credRef": "inventory-api", "reveal": true } },
            { "server": "https://other.example.com",
              "credential": { "credRef": "unrevealed", "reveal": true } },
        ]}))
        .unwrap();
        let grants = Arc::new(policy.grants(&snap.mcp_config));
        let state = SandboxState::new(
            t.id.clone(),
            Arc::new(snap),
            tier.limits(),
            *tier.limits(),
            grants,
            Arc::new(Mutex::new(db)),
            Arc::new(vault),
        );
        (state, dir)
    }
}
