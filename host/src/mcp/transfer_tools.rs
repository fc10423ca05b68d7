//! The six transfer tools of the Handoff Protocol, under the protocol's own names.
//!
//! Each tool converts its arguments and makes its operation ([`Transfers`]): on a blocking thread for every state
//! change (each is an fsynced SQLite commit), inline for `get_status` when the store is free. Bad input and refused transitions come back as tool
//! errors (`isError: true`) with the store's message and change nothing. No tool mints a token,
//! terminates a transfer or reveals a secret, and `report_usage` cannot report the
//! host-reserved kind `compute` (the host meters it from the fuel a guest burnt).
//!
//! Served over HTTP at `/mcp` (`get_status` needs `transfer:read`, `report_usage`
//! `transfer:meter`, the rest `transfer:write`, see [`required_scope`]) and over stdio by
//! `ahp serve --stdio`.
//!
//! A caller acts only on its own transfers: `snapshot_state` records the caller as the owner,
//! and `push_state`, `report_usage` and `get_status` pass the caller
//! ([`transfer_owner`]) to the store,
//! which refuses another principal's transfer exactly as a missing one. `provision_runtime` and
//! `activate` are authorized by the operator's token for the transfer instead.

use crate::shared_store::{SharedStore, StoreLock};
use std::sync::Arc;

use ahp_store::{ApiScope, Transfer};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CancelTaskParams, Extensions, GetTaskParams, GetTaskResult, Implementation, ServerCapabilities,
    ServerConfig, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{Json, ServerHandler, tool, tool_handler, tool_router};

use super::identity::{Asker, transfer_owner};
use super::schema::*;
use super::tasks;
use crate::carrier::{Carriers, NoCarriers};
use crate::host::Host;
use crate::ops::{Ops, Transfers};

/// The scope a `tools/call` of `tool` on `/mcp` needs. An unknown tool needs `transfer:write`,
/// the widest transfer scope, so a typo never slips past a narrower key (rmcp then reports it
/// unknown).
pub fn required_scope(tool: &str) -> ApiScope {
    match tool {
        "get_status" => ApiScope::TransferRead,
        "report_usage" => ApiScope::TransferMeter,
        _ => ApiScope::TransferWrite,
    }
}

/// The transfer MCP server: the host whose sandboxes `activate` resumes guests in.
#[derive(Clone)]
pub struct TransferTools {
    store: SharedStore,
    host: Host,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for TransferTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferTools").finish_non_exhaustive()
    }
}

impl TransferTools {
    /// Tools over `host`'s store, activating guests in its sandboxes.
    pub fn new(host: Host) -> Self {
        Self {
            store: host.store().clone(),
            host,
            tool_router: Self::tool_router() + Self::fixture_router(),
        }
    }

    /// The names of the tools this surface routes.
    #[cfg(test)]
    pub(super) fn tool_names(&self) -> Vec<String> {
        self.tool_router
            .list_all()
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect()
    }

    /// The conformance suite's fixture tools, in a `conformance` build only.
    fn fixture_router() -> ToolRouter<Self> {
        #[cfg(feature = "conformance")]
        return super::conformance::fixtures();
        #[cfg(not(feature = "conformance"))]
        ToolRouter::new()
    }

    /// Runs the operation `f` on a blocking thread; its error becomes the tool error message.
    async fn with_ops<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Transfers<'_>) -> ahp_store::Result<T> + Send + 'static,
    ) -> Result<T, String> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(&mut Ops::new(&mut store.locked(), &NoCarriers).transfers()))
            .await
            .map_err(|e| format!("internal error: {e}"))?
            .map_err(|e| e.to_string())
    }

    /// Runs the state change `f` on a blocking thread and shapes the transfer it returns as the
    /// tool's result.
    async fn transition(
        &self,
        f: impl FnOnce(&mut Transfers<'_>) -> ahp_store::Result<Transfer> + Send + 'static,
    ) -> Result<Json<TransferResult>, String> {
        let t = self.with_ops(f).await?;
        Ok(Json(TransferResult::from(&t)))
    }

    /// Runs the read `f` inline when a connection is free and no commit waits for its fsync —
    /// a point read costs tens of microseconds, less than the hop to a blocking thread — and
    /// otherwise on a blocking thread, queued for a connection (or for that fsync).
    async fn read_ops<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Transfers<'_>) -> ahp_store::Result<T> + Send + 'static,
    ) -> Result<T, String> {
        let inline = match self.store.try_get() {
            Some(mut store) => Ok(f(&mut Ops::new(&mut store, &NoCarriers).transfers())),
            None => Err(f),
        };
        match inline {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(f) => self.with_ops(f).await,
        }
    }
}

#[tool_router]
impl TransferTools {
    /// Capture a session snapshot as a new transfer (status `staged`) and return its checksum.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn snapshot_state(
        &self,
        ext: Extensions,
        Parameters(args): Parameters<SnapshotStateArgs>,
    ) -> Result<Json<TransferResult>, String> {
        // The transfer belongs to its creator; its agent will belong to that principal's
        // communication principal.
        let owner = transfer_owner(&ext);
        self.transition(move |t| t.snapshot(&owner, &args.into())).await
    }

    /// Size the destination by tier and open its budget (status `provisioned`). Requires a
    /// single-use `provision_runtime` token for the transfer.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn provision_runtime(
        &self,
        Parameters(a): Parameters<ProvisionRuntimeArgs>,
    ) -> Result<Json<TransferResult>, String> {
        self.transition(move |t| {
            t.provision(
                &a.transfer_id,
                a.tier.into(),
                a.budget_micro_usd,
                &a.component,
                &a.token,
            )
        })
        .await
    }

    /// Stage the snapshot for the destination (status `pushed`), verifying the checksum if given.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn push_state(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<PushStateArgs>,
    ) -> Result<Json<TransferResult>, String> {
        let caller = transfer_owner(&ext);
        self.transition(move |t| t.push(&caller, &a.transfer_id, a.checksum.as_deref()))
            .await
    }

    /// Resume the guest at the destination; returns status `active` only after the guest's
    /// resume succeeded — the irreversible step: stop the source loop only after seeing it.
    /// Requires a single-use `activate` token for the transfer.
    ///
    /// A client that declares the tasks extension (2026-07-28) gets a task at once: the token is
    /// consumed and the task created in one commit, the guest resumes meanwhile, and the
    /// activation's end (or the next start's sweep, should this host die first) completes it.
    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        output_schema = rmcp::handler::server::common::schema_for_output::<TransferResult>()
    )]
    async fn activate(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(a): Parameters<ActivateArgs>,
    ) -> Result<CallToolResponse, String> {
        // The sandbox takes the store lock itself, around each commit, and never while the guest
        // runs: activation must not hold it.
        let host = self.host.clone();
        if tasks::answers_with_task(&ctx) {
            let asker = Asker::of(&ctx.extensions);
            let task = tokio::task::spawn_blocking(move || {
                host.activate_as_task(&a.transfer_id, &a.token, asker.caller.principal())
                    .map_err(|e| e.to_string())
            })
            .await
            .map_err(|e| format!("internal error: {e}"))??;
            return Ok(tasks::created(&task));
        }
        tokio::task::spawn_blocking(move || {
            let t = host
                .activate_checked(&a.transfer_id, &a.token)
                .map_err(|e| e.to_string())?;
            Json(TransferResult::from(&t))
                .into_call_tool_result()
                .map_err(|e| e.message.to_string())
        })
        .await
        .map_err(|e| format!("internal error: {e}"))?
    }

    /// Add spend (e.g. model tokens) to the transfer's budget; at the allocation an active
    /// transfer becomes `insolvent` and its grace period starts. The kind `compute` is metered
    /// by the host and cannot be reported.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn report_usage(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ReportUsageArgs>,
    ) -> Result<Json<UsageResult>, String> {
        let caller = transfer_owner(&ext);
        let r = self
            .with_ops(move |t| t.report_usage(&caller, &a.transfer_id, a.amount_micro_usd, a.kind.as_deref()))
            .await?;
        Ok(Json(UsageResult {
            transfer_id: r.transfer.id.clone(),
            status: r.transfer.status.to_string(),
            budget: r.budget.into(),
        }))
    }

    /// Read a transfer, its budget and a page of its audit log: the newest `limit` events
    /// (default 50, at most 500) in order, and `nextBefore` to pass as `before` for the older
    /// ones. Only the caller's own transfers.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_status(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<GetStatusArgs>,
    ) -> Result<Json<StatusResult>, String> {
        let caller = transfer_owner(&ext);
        let r = self
            .read_ops(move |t| t.status(&caller, &a.transfer_id, a.page()))
            .await?;
        Ok(Json(StatusResult {
            transfer_id: r.transfer.id.clone(),
            status: r.transfer.status.to_string(),
            transfer: TransferResult::from(&r.transfer),
            budget: r.budget.map(Into::into),
            events: r.page.events.iter().map(Into::into).collect(),
            next_before: r.page.next_before,
        }))
    }
}

impl super::conformance::FixtureHost for TransferTools {
    fn fixture_store(&self) -> SharedStore {
        self.store.clone()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TransferTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("ahp", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Moves a running agent session to a metered, sandboxed destination: snapshot_state → \
                 provision_runtime (token) → push_state → activate (token) → report_usage; get_status reads. \
                 Tokens are minted by the operator (`ahp token issue`), never by a tool.",
            )
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let asker = Asker::of(&ctx.extensions);
        tasks::get(
            self.host.store().clone(),
            tasks::Surface::Transfers,
            asker,
            request.task_id,
        )
        .await
    }

    async fn cancel_task(&self, request: CancelTaskParams, ctx: RequestContext<RoleServer>) -> Result<(), McpError> {
        let asker = Asker::of(&ctx.extensions);
        let carriers: Arc<dyn Carriers> = self.host.agents().clone();
        let store = self.host.store().clone();
        tasks::cancel(store, carriers, tasks::Surface::Transfers, asker, request.task_id).await
    }

    async fn update_task(&self, request: UpdateTaskParams, ctx: RequestContext<RoleServer>) -> Result<(), McpError> {
        let asker = Asker::of(&ctx.extensions);
        tasks::update(
            self.host.store().clone(),
            tasks::Surface::Transfers,
            asker,
            request.task_id,
            request.input_responses,
        )
        .await
    }
}
