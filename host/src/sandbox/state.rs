//! What one sandbox's wasmtime `Store` carries: the guest's WASI context (no ambient
//! authority), its limiter, its meter, and the [`AgentCtx`] the `ahp:agent` interfaces see
//! (its transfer's snapshot and allow-lists, handles to the database and vault).

use std::cell::Cell;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ahp_store::{SnapshotInput, TierLimits};
use wasmtime::StoreContextMut;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::host_resources;
use super::limits::{Ceilings, Limiter};
use super::meter::{self, Meter};
use crate::carrier::NoCarriers;
use crate::egress::{CredentialSource, EgressHooks, EgressMeter};
use crate::interfaces::{AgentCtx, AgentView, Journal, Metered, TurnCalls};
use crate::policy::Grants;
use crate::shared_store::SharedStore;
use crate::vault::Vault;

/// Most bytes a sandbox may write to stdout and stderr together over its life; past it a
/// write fails (a Rust guest's `println!` then panics). Guest logs are diagnostics, not data.
pub const MAX_GUEST_LOG_BYTES: usize = 256 * 1024;

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
    /// What the `ahp:agent` interfaces see.
    pub(crate) agent: AgentCtx,
    pub(crate) meter: Meter,
    pub(crate) turn_started: Instant,
    pub(crate) log: MemoryOutputPipe,
}

impl SandboxState {
    pub(crate) fn new(
        transfer: String,
        snapshot: Arc<SnapshotInput>,
        limits: &'static TierLimits,
        ceilings: Ceilings,
        grants: Arc<Grants>,
        db: SharedStore,
        vault: Arc<dyn Vault>,
    ) -> Self {
        let log = MemoryOutputPipe::new(MAX_GUEST_LOG_BYTES);
        // Defaults of WasiCtxBuilder: no args, no environment, no preopens (so the filesystem
        // a Python guest imports has no descriptor to give), stdin empty. TCP, UDP and name
        // lookup refused and every address denied: the sockets a Python guest imports
        // (`interfaces::wasi`) can create nothing.
        let wasi = WasiCtxBuilder::new()
            .stdout(log.clone())
            .stderr(log.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        let egress_meter = Arc::new(EgressMeter::new(ceilings.egress_bytes));
        let journal = Arc::new(Journal::new(db.clone(), transfer.clone()));
        let mut egress = EgressHooks::new(
            grants.clone(),
            egress_meter.clone(),
            ceilings.wall_clock_per_turn,
            Some(CredentialSource {
                vault: vault.clone(),
                db: db.clone(),
                transfer: transfer.clone(),
            }),
        );
        egress.journal = Some(journal.clone());
        let tools = crate::tools::Toolbox::new(
            transfer.clone(),
            &snapshot.mcp_config,
            grants.clone(),
            egress_meter.clone(),
            Some(CredentialSource {
                vault: vault.clone(),
                db: db.clone(),
                transfer: transfer.clone(),
            }),
            ceilings.wall_clock_per_turn,
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
            agent: AgentCtx {
                transfer,
                snapshot,
                grants,
                checkpoint_bytes: ceilings.checkpoint_bytes,
                db,
                vault,
                calls: TurnCalls::default(),
                turn: None,
                consumed: Vec::new(),
                read: Vec::new(),
                store_time: Cell::new(Duration::ZERO),
                store_calls: Cell::new(0),
                turn_started: Instant::now(),
                wall_clock_per_turn: ceilings.wall_clock_per_turn,
                // Nobody until the host's controller is set (`Sandboxes::prepare`).
                carriers: Weak::<NoCarriers>::new(),
                tools,
                journal,
                lost: None,
            },
            meter: Meter::new(ceilings.fuel_per_turn),
            turn_started: Instant::now(),
            log,
        }
    }

    /// The transfer this sandbox continues.
    pub(crate) fn transfer(&self) -> &str {
        &self.agent.transfer
    }
}

impl AgentView for SandboxState {
    fn agent(&mut self) -> &mut AgentCtx {
        &mut self.agent
    }
}

impl Metered for SandboxState {
    fn settle(cx: &mut StoreContextMut<'_, Self>) -> wasmtime::Result<()> {
        meter::settle(cx).map(|_| ())
    }

    fn external_spend(cx: &mut StoreContextMut<'_, Self>, remaining: u64) -> wasmtime::Result<()> {
        meter::external_spend(cx, remaining)
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
