//! The host as MCP client of a sandbox's servers: what `ahp:agent/tools` does behind its
//! adapter (`interfaces::tools`).
//!
//! A sandbox's [`Toolbox`] knows the servers it may reach — each MCP server URL of its
//! snapshot's `mcpConfig` whose origin the operator's policy allows ([`Grants`], as for
//! `wasi:http`) — and talks to them with rmcp's client over Streamable HTTP, in either protocol
//! era (rmcp's `Auto` lifecycle: `server/discover` of 2026-07-28, falling back to a 2025-11-25
//! `initialize` session). Every byte goes through [`client::EgressClient`]: the sandbox's pinned,
//! policy-checked, byte-counted egress path, with the server's credential injected by the host.
//!
//! **Sessions.** A server is connected on first use and the session kept for the sandbox's life
//! (a session that failed is dropped and made again on the next use); the host holds at most
//! one per reachable server, and the number of servers is bounded by the snapshot's. Measured
//! (BENCHMARKS.md, `tools` bench): connecting costs about as much as several calls, so a
//! session per sandbox beats one per turn.
//!
//! **Bounds** (stated in `wit/agent.wit`): [`MAX_TOOLS`] tools in a list, descriptions cut at
//! [`MAX_DESCRIPTION_BYTES`], tools with a schema over [`MAX_SCHEMA_BYTES`] left out;
//! arguments at most [`MAX_ARGUMENTS_BYTES`]; a result at most [`MAX_RESULT_BYTES`] (each
//! response body is read up to [`client::MAX_RESPONSE_BYTES`], nothing past it is held);
//! [`MAX_CALLS_PER_TURN`] and [`MAX_LISTS_PER_TURN`]; a call (its connection included) waits
//! at most [`MAX_CALL_WAIT`], and never past [`TURN_MARGIN_DIVISOR`]ths of the turn's wall
//! clock before it ends, so the guest still has time to answer.
//!
//! **Charges.** A server's rule in the policy may set `toolCallMicroUsd`, the price of one
//! call (default 0). A call the host sends is charged that price under the host-reserved kind
//! `tool_calls` whatever its outcome (the server may have done the work); a call refused before
//! it is sent (unknown tool, bad arguments, a bound, time, budget) is charged nothing, and a
//! call the remaining budget cannot pay is refused. Each sent call is audited as `tool_called`
//! (`server`, `tool`, `chargedMicroUsd`, `outcome`), never with its arguments or result.

pub mod client;
pub mod inventory_server;
pub mod naming;
mod result;

pub use result::{CallResult, Content, Error, Tool};
use result::{bounded, convert};

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ahp_store::{EventKind, McpServer, TOOL_CALLS_USAGE_KIND};
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams, ProtocolVersion};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;

use self::client::{EgressClient, Trouble};
use crate::egress::{CredentialSource, EgressMeter};
use crate::policy::{Grants, Origin, ServerGrant};
use crate::scrub::Scrub;
use crate::shared_store::StoreLock;

/// Most tools `list` returns, over all servers: more than a model can choose among, few enough
/// that their definitions fit a request.
pub const MAX_TOOLS: usize = 256;
/// Longest tool description kept, in bytes (a longer one is cut at a character boundary).
pub const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
/// Largest input schema kept, in bytes of JSON; a tool with a larger one is left out.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Largest arguments of one call, in bytes of JSON.
pub const MAX_ARGUMENTS_BYTES: usize = 1024 * 1024;
/// Largest result of one call: its text, decoded media and structured content together.
pub const MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;
/// `tools.call` calls one turn may make.
pub const MAX_CALLS_PER_TURN: u32 = 64;
/// `tools.list` calls one turn may make.
pub const MAX_LISTS_PER_TURN: u32 = 16;
/// Longest wait for one call (or list) and its connection.
pub const MAX_CALL_WAIT: Duration = Duration::from_secs(60);
/// A call ends at the latest one `1/TURN_MARGIN_DIVISOR` of the turn's wall clock before the
/// turn does, so the guest can still answer.
pub const TURN_MARGIN_DIVISOR: u32 = 10;
/// Most pages of `tools/list` read from one server.
pub const MAX_LIST_PAGES: usize = 16;

/// One reachable MCP server of a sandbox.
struct Server {
    /// The snapshot's URL of it.
    url: String,
    grant: ServerGrant,
    session: Option<RunningService<RoleClient, ()>>,
    trouble: Arc<Trouble>,
    /// The forms of its injected credential, once resolved ([`Toolbox::scrub`]).
    scrub: Option<Scrub>,
}

/// How a request to a server failed: connecting, or the request itself.
#[derive(Debug)]
enum Failure {
    Connect(Box<ClientInitializeError>),
    Request(ServiceError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "connecting: {e}"),
            Self::Request(e) => e.fmt(f),
        }
    }
}

/// A tool of the last listing: the name the guest calls, its server, the server's own name.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    server: usize,
    tool: String,
}

/// The MCP client of one sandbox. See the [module docs](self).
pub struct Toolbox {
    transfer: String,
    servers: Vec<Server>,
    grants: Arc<Grants>,
    meter: Arc<EgressMeter>,
    credentials: Option<CredentialSource>,
    audited: Arc<Mutex<BTreeSet<String>>>,
    catalog: Option<Vec<Entry>>,
    wall_clock: Duration,
    deadline: Instant,
    calls: u32,
    lists: u32,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("servers", &self.servers.len())
            .field("connected", &self.connected())
            .finish_non_exhaustive()
    }
}

impl Toolbox {
    /// The toolbox of a sandbox of `transfer` whose snapshot lists `mcp_config`, allowed
    /// `grants`, counting into `meter`, with credentials from `credentials`, whose turns last
    /// `wall_clock`.
    pub(crate) fn new(
        transfer: String,
        mcp_config: &[McpServer],
        grants: Arc<Grants>,
        meter: Arc<EgressMeter>,
        credentials: Option<CredentialSource>,
        wall_clock: Duration,
    ) -> Self {
        let mut seen = BTreeSet::new();
        let servers = mcp_config
            .iter()
            .filter_map(|m| {
                let origin = Origin::parse(&m.server).ok()?;
                let grant = grants.server(&origin)?.clone();
                seen.insert(m.server.clone()).then(|| Server {
                    url: m.server.clone(),
                    grant,
                    session: None,
                    trouble: Arc::default(),
                    scrub: None,
                })
            })
            .collect();
        Self {
            transfer,
            servers,
            grants,
            meter,
            credentials,
            audited: Arc::default(),
            catalog: None,
            wall_clock,
            deadline: Instant::now() + wall_clock,
            calls: 0,
            lists: 0,
        }
    }

    /// A toolbox outside any sandbox — what the benches and `ahp` tools use — for a transfer
    /// whose snapshot lists `mcp_config`, under `policy`, credentials from `vault` (their use
    /// audited and calls charged in `db`), `egress_bytes` of egress over its life and turns of
    /// `wall_clock` (the first starts now).
    pub fn open(
        transfer: &str,
        mcp_config: &[McpServer],
        policy: &crate::policy::Policy,
        vault: Arc<dyn crate::vault::Vault>,
        db: crate::shared_store::SharedStore,
        egress_bytes: u64,
        wall_clock: Duration,
    ) -> Self {
        Self::new(
            transfer.to_owned(),
            mcp_config,
            Arc::new(policy.grants(mcp_config)),
            Arc::new(EgressMeter::new(egress_bytes)),
            Some(CredentialSource {
                vault,
                db,
                transfer: transfer.to_owned(),
            }),
            wall_clock,
        )
    }

    /// Egress bytes counted so far, the MCP client's and (in a sandbox) the guest's together.
    pub fn egress_used(&self) -> u64 {
        self.meter.used()
    }

    /// Starts a turn: resets the per-turn counts and sets the time calls must end by.
    pub fn start_turn(&mut self) {
        self.calls = 0;
        self.lists = 0;
        self.deadline = Instant::now() + self.wall_clock;
    }

    /// How many servers have a live session.
    pub fn connected(&self) -> usize {
        self.servers.iter().filter(|s| s.session.is_some()).count()
    }

    /// The moment the current call must end by.
    fn call_deadline(&self) -> Result<Instant, Error> {
        let end = self.deadline - self.wall_clock / TURN_MARGIN_DIVISOR;
        let now = Instant::now();
        if end <= now {
            return Err(Error::Unavailable(
                "no time is left in this turn for a tool call".into(),
            ));
        }
        Ok(end.min(now + MAX_CALL_WAIT))
    }

    /// The session with server `i`, connecting it if needed.
    async fn session(&mut self, i: usize) -> Result<&RunningService<RoleClient, ()>, Failure> {
        if self.servers[i].session.is_none() {
            let s = &self.servers[i];
            let client = EgressClient::new(
                s.grant.clone(),
                self.grants.clone(),
                self.meter.clone(),
                self.credentials.clone(),
                self.audited.clone(),
                self.wall_clock.min(MAX_CALL_WAIT),
                s.trouble.clone(),
            );
            let config = StreamableHttpClientTransportConfig::with_uri(s.url.clone())
                .max_json_response_size(client::MAX_RESPONSE_BYTES)
                .max_sse_event_size(client::MAX_RESPONSE_BYTES);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let lifecycle = ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            };
            let session =
                ().serve_with_lifecycle(transport, lifecycle)
                    .await
                    .map_err(|e| Failure::Connect(Box::new(e)))?;
            self.servers[i].session = Some(session);
        }
        Ok(self.servers[i].session.as_ref().expect("connected above"))
    }

    /// Maps a failed request to server `i` to the WIT error, dropping a session whose transport
    /// failed so the next use reconnects.
    fn failure(&mut self, i: usize, e: Failure) -> Error {
        let s = &mut self.servers[i];
        let error = if s.trouble.too_large() {
            Error::TooLarge(format!(
                "{} sent more than {} bytes in one response",
                s.url,
                client::MAX_RESPONSE_BYTES
            ))
        } else if s.trouble.refused() || self.meter.breached() {
            Error::Refused(format!(
                "the host did not send to {}: the tier's egress ceiling is reached or its credential is unavailable",
                s.url
            ))
        } else if let Failure::Request(ServiceError::McpError(data)) = &e {
            return Error::ServerError(bounded(&data.message, 1024));
        } else {
            Error::Unavailable(bounded(&format!("{}: {e}", s.url), 1024))
        };
        s.session = None;
        error
    }

    /// The tools of every reachable server, named for `call`. A server that fails is left out
    /// (and logged for the operator).
    ///
    /// # Errors
    ///
    /// [`Error::Refused`] past [`MAX_LISTS_PER_TURN`].
    pub async fn list(&mut self) -> Result<Vec<Tool>, Error> {
        self.lists += 1;
        if self.lists > MAX_LISTS_PER_TURN {
            return Err(Error::Refused(format!(
                "more than {MAX_LISTS_PER_TURN} tools.list calls in one turn"
            )));
        }
        self.refresh().await
    }

    /// Lists every server's tools into the catalog.
    async fn refresh(&mut self) -> Result<Vec<Tool>, Error> {
        let mut found: Vec<(usize, rmcp::model::Tool)> = Vec::new();
        for i in 0..self.servers.len() {
            if found.len() >= MAX_TOOLS {
                break;
            }
            let deadline = self.call_deadline()?;
            let room = MAX_TOOLS - found.len();
            let listed = tokio::time::timeout_at(deadline.into(), self.list_server(i, room)).await;
            match listed {
                Ok(Ok(tools)) => found.extend(tools.into_iter().map(|t| (i, t))),
                Ok(Err(e)) => {
                    let e = self.failure(i, e);
                    tracing::warn!(transfer = %self.transfer, server = %self.servers[i].url, error = %e, "tools/list failed; the server's tools are left out");
                }
                Err(_) => {
                    self.servers[i].session = None;
                    tracing::warn!(transfer = %self.transfer, server = %self.servers[i].url, "tools/list timed out; the server's tools are left out");
                }
            }
        }
        let mut kept: Vec<(usize, rmcp::model::Tool, String)> = Vec::new();
        for (i, t) in found {
            let schema = serde_json::to_string(&*t.input_schema).unwrap_or_else(|_| "{}".into());
            if schema.len() > MAX_SCHEMA_BYTES {
                tracing::warn!(server = %self.servers[i].url, tool = %bounded(&t.name, 64), "tool left out: its schema passes the bound");
                continue;
            }
            kept.push((i, t, schema));
        }
        let names = naming::assign(
            &kept
                .iter()
                .map(|(i, t, _)| (i + 1, t.name.as_ref()))
                .collect::<Vec<_>>(),
        );
        let mut catalog = Vec::new();
        let mut tools = Vec::new();
        for ((i, t, schema), name) in kept.into_iter().zip(names) {
            let Some(name) = name else { continue };
            let scrub = self.scrub(i);
            if matches!(scrub.text(&name), std::borrow::Cow::Owned(_)) {
                // A name is `a-z A-Z 0-9 _ -`: one holding the credential is left out, not renamed.
                tracing::warn!(server = %self.servers[i].url, "tool left out: its name holds the server's credential");
                continue;
            }
            catalog.push(Entry {
                name: name.clone(),
                server: i,
                tool: t.name.to_string(),
            });
            tools.push(Tool {
                name,
                description: bounded(
                    &scrub.text(t.description.as_deref().unwrap_or("")),
                    MAX_DESCRIPTION_BYTES,
                ),
                input_schema_json: scrub.text(&schema).into_owned(),
                server: self.servers[i].url.clone(),
            });
        }
        self.catalog = Some(catalog);
        Ok(tools)
    }

    /// At most `room` tools of server `i`, page by page.
    async fn list_server(&mut self, i: usize, room: usize) -> Result<Vec<rmcp::model::Tool>, Failure> {
        let session = self.session(i).await?;
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_LIST_PAGES {
            let page = session
                .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await
                .map_err(Failure::Request)?;
            tools.extend(page.tools.into_iter().take(room - tools.len()));
            cursor = page.next_cursor;
            if cursor.is_none() || tools.len() >= room {
                break;
            }
        }
        Ok(tools)
    }

    /// Calls tool `name` with `arguments_json`, charging `db` for it.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub async fn call(
        &mut self,
        db: &crate::shared_store::SharedStore,
        name: &str,
        arguments_json: &str,
    ) -> Result<CallResult, Error> {
        self.calls += 1;
        if self.calls > MAX_CALLS_PER_TURN {
            return Err(Error::Refused(format!(
                "more than {MAX_CALLS_PER_TURN} tools.call calls in one turn"
            )));
        }
        if arguments_json.len() > MAX_ARGUMENTS_BYTES {
            return Err(Error::InvalidArguments(format!(
                "the arguments are {} bytes; at most {MAX_ARGUMENTS_BYTES}",
                arguments_json.len()
            )));
        }
        let arguments: serde_json::Map<String, serde_json::Value> = serde_json::from_str(arguments_json)
            .map_err(|_| Error::InvalidArguments("the arguments are not a JSON object".into()))?;
        if self.catalog.is_none() {
            self.refresh().await?;
        }
        let entry = self
            .catalog
            .as_ref()
            .and_then(|c| c.iter().find(|e| e.name == name))
            .cloned()
            .ok_or_else(|| Error::UnknownTool(bounded(name, 64)))?;
        let price = self.servers[entry.server].grant.tool_call_micro_usd;
        let remaining = {
            // Read with the check that this host still carries the agent: one that lost it
            // (a claim, a move) calls no tool for it.
            let budget = db.locked().budget_carried_here(&self.transfer);
            if let Err(e @ ahp_store::Error::CarriedElsewhere { .. }) = &budget {
                return Err(Error::Refused(e.to_string()));
            }
            // What is left once spend and the open model-call reservations are counted.
            budget.ok().flatten().map_or(0, |b| b.remaining_micro_usd())
        };
        if remaining == 0 {
            return Err(Error::Insolvent);
        }
        if price > remaining {
            return Err(Error::Refused(format!(
                "the tool costs {price} micro-USD and the budget has {remaining} left"
            )));
        }
        let deadline = self.call_deadline()?;
        let i = entry.server;
        let sent = tokio::time::timeout_at(deadline.into(), self.call_server(i, &entry.tool, arguments)).await;
        // Whether the request went out: not when the session could not be opened, nor when the
        // host refused to send it (the egress ceiling, the credential). Only a call sent is
        // charged and audited.
        let (outcome, went_out) = match sent {
            Ok(Ok(result)) => (convert(result), true),
            Ok(Err(e)) => {
                let connected = !matches!(e, Failure::Connect(_));
                let e = self.failure(i, e);
                let went_out = connected && !matches!(e, Error::Refused(_));
                (Err(e), went_out)
            }
            Err(_) => {
                self.servers[i].session = None;
                let e = Error::Unavailable(format!("{} did not answer in time", self.servers[i].url));
                (Err(e), true)
            }
        };
        let charged = if went_out {
            self.charge(db, i, &entry.tool, price, &outcome)
        } else {
            0
        };
        let scrub = self.scrub(i);
        match outcome {
            Ok(mut r) => {
                r.scrub(&scrub);
                r.charged_micro_usd = charged;
                Ok(r)
            }
            Err(e) => Err(e.scrubbed(&scrub)),
        }
    }

    /// The forms of server `i`'s injected credential ([`crate::scrub`]), scrubbed from all it
    /// answers: resolved from the vault once (nothing to scrub for a server with no credential,
    /// or one the vault cannot resolve — the host sent it none).
    fn scrub(&mut self, i: usize) -> Scrub {
        let server = &mut self.servers[i];
        if server.scrub.is_none() {
            let secret = match (&server.grant.credential, &self.credentials) {
                (Some(rule), Some(source)) => source.vault.resolve(&rule.cred_ref).ok(),
                _ => None,
            };
            server.scrub = Some(Scrub::new(secret.as_deref()));
        }
        server.scrub.clone().unwrap_or_default()
    }

    async fn call_server(
        &mut self,
        i: usize,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<rmcp::model::CallToolResult, Failure> {
        let session = self.session(i).await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        session.call_tool(params).await.map_err(Failure::Request)
    }

    /// Charges `price` for a call sent to server `i` and audits it; returns what was charged.
    fn charge(
        &self,
        db: &crate::shared_store::SharedStore,
        i: usize,
        tool: &str,
        price: u64,
        outcome: &Result<CallResult, Error>,
    ) -> u64 {
        let server = &self.servers[i].url;
        let mut db = db.locked();
        let charged = if price > 0 {
            match db.report_usage(&self.transfer, price, TOOL_CALLS_USAGE_KIND) {
                Ok(_) => price,
                Err(e) => {
                    tracing::error!(transfer = %self.transfer, error = %e, "could not charge a tool call");
                    0
                }
            }
        } else {
            0
        };
        let outcome = match outcome {
            Ok(r) if r.is_error => "tool_error",
            Ok(_) => "ok",
            Err(e) => e.kind(),
        };
        let detail =
            json!({ "server": server, "tool": bounded(tool, 256), "chargedMicroUsd": charged, "outcome": outcome });
        if let Err(e) = db.record_event(&self.transfer, EventKind::ToolCalled, detail) {
            tracing::error!(transfer = %self.transfer, error = %e, "could not audit a tool call");
        }
        charged
    }
}
