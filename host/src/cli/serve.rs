//! `ahp serve`: the MCP transfer server over stdio and/or HTTP (with the console at
//! `/console`), plus the reapers on an interval.
//!
//! With `--stdio` the server runs until the stdio client disconnects; with only `--http` it runs
//! until SIGINT or SIGTERM. Logs go to stderr, never to the stdio MCP stream.
//!
//! At start it takes the data directory's serve guard (one `ahp serve` per directory) and fails
//! every activation a previous process left in progress — a crash or `kill -9` mid-activation —
//! so the orchestrator can retry with a new token. The HTTP listener's timeouts and connection
//! limit are flags (`--header-read-timeout`, `--request-timeout`, `--idle-timeout`,
//! `--max-connections`). Idle agents are parked after `--park-after`, and at most `--max-live`
//! sandboxes are kept (see `ahp_host::sandbox::park`); the kernel setting that many needs is
//! reported at start.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ahp_host::agents::hosting::JoinReport;
use ahp_host::agents::{Agents, REPAIR_SLICE};
use ahp_host::mcp::cors::{self, BrowserOrigin};
use ahp_host::mcp::http::{self, Auth};
use ahp_host::mcp::listener::{self, Limits};
use ahp_host::mcp::{ConversationTools, TransferTools, serve_stdio};
use ahp_host::sandbox::Parking;
use ahp_host::shared_store::{SharedStore, StoreLock};

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::DataDir;

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("transport").required(true).multiple(true).args(["stdio", "http"]))]
pub(crate) struct ServeArgs {
    /// Serve MCP over stdin/stdout (the local operator's transport; full scopes).
    #[arg(long)]
    stdio: bool,
    /// Which tools --stdio serves: the six transfer tools, or the conversation tools (as the
    /// local operator). HTTP serves both, at /mcp and /mcp/conversations.
    #[arg(long, value_enum, default_value = "transfers")]
    surface: Surface,
    /// Serve MCP over Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:7070).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// HTTP authorization: bearer API keys of principals and access tokens of the issuers `ahp
    /// auth issuer add` names, or none (loopback addresses only).
    #[arg(long, value_enum, default_value = "keys")]
    auth: AuthArg,
    /// The origin clients reach the HTTP server at (e.g. `https://ahp.example.com`, behind a
    /// proxy): access tokens must name its /mcp or /mcp/conversations as their audience
    /// [default: `http://ADDR`].
    #[arg(long, value_name = "URL", requires = "http")]
    public_url: Option<url::Url>,
    /// Let web pages of this origin call /mcp and /mcp/conversations and read their metadata
    /// from a browser (CORS), e.g. `http://localhost:6274`. Repeatable; exact origins only
    /// (`scheme://host[:port]`), no wildcard. Pages of other origins stay refused [default: none].
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    allow_origins: Vec<BrowserOrigin>,
    /// How often the reapers sweep.
    #[arg(long, default_value = "1m", value_parser = super::parse_duration)]
    reap_every: Duration,
    /// Unactivated transfers older than this expire.
    #[arg(long, default_value = "1h", value_parser = super::parse_duration)]
    ttl: Duration,
    /// Insolvent transfers are terminated after this grace period.
    #[arg(long, default_value = "15m", value_parser = super::parse_duration)]
    grace: Duration,
    /// How long this host's lease lasts unless renewed (renewed every third of it). On a shared
    /// database, a dead host's agents answer again from a survivor within about this long.
    #[arg(long, default_value = "15s", value_parser = super::parse_duration)]
    host_lease: Duration,
    /// On a shared database: start even while another process holds this host id's lease,
    /// fencing it out (its agents are claimed back here). Without it `ahp serve` refuses to
    /// start until that lease runs out: two processes under one id would fence each other.
    #[arg(long)]
    take_over: bool,
    /// On a shared database: how often to look for wakes, moves and lapsed hosts that no signal
    /// announced (signals make it faster; correctness never waits for them).
    #[arg(long, default_value = "1s", value_parser = super::parse_duration)]
    poll_every: Duration,
    /// The vault directory (credential reference `x` is the file `DIR/x`); one every host can
    /// read when several share a database [default: the data directory's `vault`].
    #[arg(long, value_name = "DIR")]
    vault_dir: Option<std::path::PathBuf>,
    /// Park an agent's sandbox after it has been idle this long: the agent stays ready, and its
    /// next turn starts a fresh sandbox from its checkpoint (`never`: only to make room).
    #[arg(long, default_value = "15m", value_parser = parse_park_after)]
    park_after: ParkAfter,
    /// Most sandboxes this host keeps at once (the engine's pool slots); beyond it the least
    /// recently used agents are parked. Each takes four memory mappings: past about
    /// 15,000 the kernel's `vm.max_map_count` must be raised (reported at start).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=MAX_LIVE_LIMIT as i64))]
    max_live: u32,
    /// How long a goal whose controller an MCP App carries must see no meaningful work, while
    /// its Goal Plan card is shown, before its controller is woken once (1s to 24h).
    #[arg(long, default_value = "5m", value_parser = parse_goal_quiet_period)]
    goal_quiet_period: Duration,
    #[command(flatten)]
    http_limits: HttpLimitArgs,
}

fn parse_goal_quiet_period(s: &str) -> Result<Duration, String> {
    use ahp_store::delegation::{MAX_STALL_QUIET_PERIOD, MIN_STALL_QUIET_PERIOD};
    let d = super::parse_duration(s)?;
    if !(MIN_STALL_QUIET_PERIOD..=MAX_STALL_QUIET_PERIOD).contains(&d) {
        return Err("must be 1s to 24h".into());
    }
    Ok(d)
}

/// The largest `--max-live`: pool slots reserve address space (2 GiB and a guard each by
/// default), and 100,000 of them is already most of what x86-64 gives a process.
const MAX_LIVE_LIMIT: u32 = 50_000;

/// `--park-after`: a duration, or never.
#[derive(Debug, Clone, Copy)]
struct ParkAfter(Option<Duration>);

fn parse_park_after(s: &str) -> Result<ParkAfter, String> {
    if s == "never" {
        return Ok(ParkAfter(None));
    }
    let d = super::parse_duration(s)?;
    if d.is_zero() {
        return Err("must be longer than zero (or `never`)".into());
    }
    Ok(ParkAfter(Some(d)))
}

/// The HTTP listener's bounds (see `ahp_host::mcp::listener::Limits` for why each default).
#[derive(Debug, Args)]
struct HttpLimitArgs {
    /// Close a connection that has not sent a complete request head within this long.
    #[arg(long, default_value = "10s", value_parser = super::parse_duration)]
    header_read_timeout: Duration,
    /// Answer 408 to a request not handled within this long of its head (above the largest
    /// tier's wall clock per turn, so activations are never cut).
    #[arg(long, default_value = "120s", value_parser = super::parse_duration)]
    request_timeout: Duration,
    /// Close a connection with no request being handled and no bytes moving for this long.
    #[arg(long, default_value = "60s", value_parser = super::parse_duration)]
    idle_timeout: Duration,
    /// Most open HTTP connections; one more is answered 503 and closed.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_connections: u32,
}

impl HttpLimitArgs {
    fn limits(&self) -> anyhow::Result<Limits> {
        for (flag, d) in [
            ("--header-read-timeout", self.header_read_timeout),
            ("--request-timeout", self.request_timeout),
            ("--idle-timeout", self.idle_timeout),
        ] {
            anyhow::ensure!(!d.is_zero(), "{flag} must be longer than zero");
        }
        Ok(Limits {
            header_read_timeout: self.header_read_timeout,
            request_timeout: self.request_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections as usize,
            ..Limits::default()
        })
    }
}

/// Memory mappings one pool slot takes: its fiber stack and guard page (mapped at start), and
/// its linear memory and guard region while a sandbox is live in it (tables take none of their
/// own; measured by `host/benches/parked.rs`: 60,115 mappings at 15,000 live).
const MAPPINGS_PER_SANDBOX: u64 = 4;

/// Mappings the rest of the process takes, with room to spare.
const OTHER_MAPPINGS: u64 = 4_096;

/// Says at start how many sandboxes this host keeps and whether the kernel's
/// `vm.max_map_count` lets it (the default, 65,530, stops near 15,000 sandboxes): a host that
/// runs out of mappings fails to set up a sandbox, so the operator is told the setting to use.
fn report_map_count(max_live: u32) {
    let needed = u64::from(max_live) * MAPPINGS_PER_SANDBOX + OTHER_MAPPINGS;
    let limit = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    match limit {
        Some(limit) if limit < needed => tracing::warn!(
            max_live,
            max_map_count = limit,
            "--max-live {max_live} needs about {needed} memory mappings but vm.max_map_count is {limit}: \
             run `sysctl -w vm.max_map_count={needed}` (or lower --max-live)"
        ),
        Some(limit) => tracing::info!(
            max_live,
            max_map_count = limit,
            "keeping up to {max_live} live sandboxes"
        ),
        None => tracing::info!(
            max_live,
            "keeping up to {max_live} live sandboxes (vm.max_map_count unreadable)"
        ),
    }
}

/// The reason recorded on an activation a previous `ahp serve` left in progress.
const INTERRUPTED_REASON: &str =
    "interrupted: the host stopped during the activation (no guest survives its process); retry with a new token";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Surface {
    /// The transfer tools (`snapshot_state` … `get_status`).
    Transfers,
    /// The conversation tools (agents, conversations, inboxes, wakes).
    Conversations,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AuthArg {
    /// `Authorization: Bearer <api key>` of a principal (`ahp principal add`), or of an access
    /// token of an issuer (`ahp auth issuer add`).
    Keys,
    /// No authorization: accepted only on a loopback address.
    None,
}

pub(crate) fn run(dir: &DataDir, args: ServeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(!args.reap_every.is_zero(), "--reap-every must be longer than zero");
    let auth = match (args.auth, args.http) {
        (AuthArg::None, Some(addr)) if !addr.ip().is_loopback() => {
            anyhow::bail!("--auth none is accepted only on a loopback address, not {addr}")
        }
        (AuthArg::None, Some(addr)) => {
            tracing::warn!("serving {addr} with --auth none: any local process can call every tool");
            Auth::None
        }
        _ => Auth::Keys,
    };
    let limits = args.http_limits.limits()?;
    if let Some(public) = &args.public_url {
        ahp_host::mcp::oauth::check_origin(public)?;
    }
    let mut browsers: Vec<BrowserOrigin> = Vec::new();
    for origin in &args.allow_origins {
        if !browsers.contains(origin) {
            browsers.push(origin.clone());
        }
    }
    anyhow::ensure!(
        browsers.len() <= cors::MAX_ORIGINS,
        "at most {} --allow-origin, not {}",
        cors::MAX_ORIGINS,
        browsers.len()
    );
    anyhow::ensure!(!args.poll_every.is_zero(), "--poll-every must be longer than zero");
    // One serving process per data directory on SQLite: only the holder may decide that an
    // activation in progress was interrupted, since an activation belongs to the process
    // running its guest. On a shared database the host lease decides instead.
    let shared = dir.is_shared();
    let _guard = if shared { None } else { Some(dir.lock_for_serve()?) };
    let parking = Parking {
        idle_after: args.park_after.0,
        max_live: args.max_live as usize,
    };
    report_map_count(args.max_live);
    let host = dir.open_host_with(args.vault_dir.as_deref(), |b| {
        b.engine(|e| e.max_live_sandboxes = args.max_live)
            .parking(parking)
            .agents(ahp_host::agents::AgentsConfig {
                goal_quiet_period: args.goal_quiet_period,
                ..Default::default()
            })
    })?;
    let store = host.store().clone();
    let agents = host.agents().clone();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // Joining runs the takeover of what a previous process left (a fresh sandbox needs the
    // runtime to resume a guest later, not to bind).
    let address = args.http.map(|a| format!("http://{a}"));
    let joined = if args.take_over {
        agents.join_taking_over(args.host_lease, address.as_deref(), shared, INTERRUPTED_REASON)
    } else {
        agents.join(args.host_lease, address.as_deref(), shared, INTERRUPTED_REASON)
    }
    .map_err(|e| match e {
        ahp_host::sandbox::Error::Store(ahp_store::Error::HostInUse { .. }) => anyhow::anyhow!(
            "{e}: give this process another --host-id (or AHP_HOST_ID), wait for that lease to \
             run out, or pass --take-over if that process is gone"
        ),
        e => e.into(),
    })?;
    report_join(&joined);
    if shared {
        signal_between_hosts(dir, &agents)?;
    }
    runtime.block_on(async {
        let workers = tokio::spawn(agents.clone().run_workers());
        // The lease on a timer of its own: no claim, bind or repair delays its renewal.
        let lease = tokio::spawn(lease_forever(agents.clone(), args.host_lease / 6));
        // The other hosts' chores exist only on a shared database: on SQLite no tick runs.
        let hosting =
            shared.then(|| tokio::spawn(host_forever(agents.clone(), args.poll_every.min(args.host_lease / 3))));
        // Deliveries may already wait for the re-bound agents (a store read: off the workers).
        let scheduling = agents.clone();
        tokio::task::spawn_blocking(move || scheduling.schedule_all()).await?;
        let reaper = tokio::spawn(reap_forever(
            store.clone(),
            agents.clone(),
            args.reap_every,
            args.ttl,
            args.grace,
        ));
        let tools = TransferTools::new(host.clone());
        let http_server = match args.http {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                let local = listener.local_addr()?;
                // Not `eprintln!`: it panics when stderr is closed.
                let _ = writeln!(std::io::stderr(), "ahp: MCP over HTTP at http://{local}/mcp");
                let _ = writeln!(std::io::stderr(), "ahp: console at http://{local}/console");
                let console = ahp_host::console::router(store.clone(), local, agents.clone());
                let site = http::Site {
                    local,
                    public: args
                        .public_url
                        .clone()
                        .unwrap_or_else(|| http::Site::local(local).public),
                    browsers: browsers.clone(),
                };
                for origin in &site.browsers {
                    let _ = writeln!(
                        std::io::stderr(),
                        "ahp: web pages of {origin} may call /mcp and /mcp/conversations (CORS)"
                    );
                }
                let router = http::router(tools.clone(), agents.clone(), store.clone(), auth, &site)
                    .map_err(std::io::Error::other)?
                    .merge(console);
                Some(tokio::spawn(listener::serve(
                    listener,
                    router,
                    limits,
                    shutdown_signal(),
                )))
            }
            None => None,
        };
        let result = match (args.stdio, http_server) {
            (true, server) => {
                let served = match args.surface {
                    Surface::Transfers => serve_stdio(tools).await,
                    Surface::Conversations => {
                        serve_stdio(ConversationTools::new(store.clone(), true).with_carriers(agents.clone())).await
                    }
                };
                if let Some(s) = server {
                    s.abort();
                }
                served
            }
            (false, Some(server)) => server.await.map_err(std::io::Error::other)?,
            (false, None) => unreachable!("clap requires --stdio or --http"),
        };
        reaper.abort();
        if let Some(hosting) = hosting {
            hosting.abort();
        }
        lease.abort();
        workers.abort();
        result
    })?;
    agents.leave();
    Ok(())
}

fn report_join(joined: &JoinReport) {
    if let Some(takeover) = &joined.takeover {
        for id in &takeover.interrupted {
            tracing::warn!(transfer = %id, "failed an activation a previous ahp serve left in progress");
        }
        tracing::info!(
            released = takeover.reconciled.released_claims,
            unknown = takeover.reconciled.marked_unknown,
            rebound = takeover.rebound,
            repaired = takeover.repaired.len(),
            "takeover reconciled"
        );
    }
    let reclaimed = joined.own.as_ref().map_or(0, |c| c.transfers.len());
    tracing::info!(
        incarnation = joined.incarnation,
        reclaimed,
        claimed_hosts = joined.claimed.len(),
        "joined as a host"
    );
}

/// On a shared database: a thread that sends this host's signals (`NOTIFY`) and one that
/// listens for the others', each on a connection of its own. Signals are opportunities: a
/// lost one is covered by [`host_forever`]'s polling.
fn signal_between_hosts(dir: &DataDir, agents: &Arc<Agents>) -> anyhow::Result<()> {
    let url = dir.database_url().context("a shared database has a URL")?.to_owned();
    let mut signaller = ahp_store_postgres::Signaller::connect(&url)?;
    let mut listener = ahp_store_postgres::Listener::connect(&url)?;
    let (send, receive) = std::sync::mpsc::channel::<String>();
    agents.signal_with(send);
    std::thread::Builder::new().name("ahp-signal".into()).spawn(move || {
        for payload in receive {
            if let Err(e) = signaller.send(&payload) {
                tracing::debug!(error = %e, "a signal was not sent; the other host's poll covers it");
            }
        }
    })?;
    let listening = agents.clone();
    std::thread::Builder::new().name("ahp-listen".into()).spawn(move || {
        loop {
            match listener.wait(Duration::from_secs(1)) {
                Ok(signals) => {
                    for s in signals {
                        listening.on_signal(&s);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "listening for signals failed; retrying");
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
        }
    })?;
    Ok(())
}

/// Every `every`: keeps the host lease; on a shared database also claims lapsed hosts, hands
/// over the agents being moved away, binds what was handed here and schedules the agents with
/// wakes other hosts committed (the polling behind every signal).
/// Keeps the host lease every `every` (it is renewed once a third of it has passed), on a
/// blocking thread of its own: nothing else this host does waits in front of it.
async fn lease_forever(agents: Arc<Agents>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let a = agents.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || a.keep_lease()).await {
            tracing::error!(error = %e, "keeping the host lease failed");
        }
    }
}

/// The host's other chores on a shared database, every `every`: claim lapsed hosts' agents,
/// hand over moves, repair bindings a slice at a time, schedule agents with wakes.
async fn host_forever(agents: Arc<Agents>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let a = agents.clone();
        let ran = tokio::task::spawn_blocking(move || {
            a.claim_lapsed();
            a.hand_over_moves();
            if let Err(e) = a.repair_some_bindings(REPAIR_SLICE) {
                tracing::warn!(error = %e, "binding repair failed");
            }
            a.schedule_all();
        })
        .await;
        if let Err(e) = ran {
            tracing::error!(error = %e, "the host tick failed");
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = term => {} }
}

/// Sweeps both reapers every `every`, logging what they ended, then drops the carriers and live
/// sandboxes of transfers that are no longer `active`, renews the carrier leases that are more
/// than half spent, binds the active transfers left without a carrier (a failed bind), and
/// schedules the agents with a wake to claim (the safety net for posts another process
/// committed, and for agents whose retries ran out). Errors are logged, not fatal: the next
/// tick tries again.
async fn reap_forever(store: SharedStore, agents: Arc<Agents>, every: Duration, ttl: Duration, grace: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let store = store.clone();
        let swept = tokio::task::spawn_blocking(move || -> ahp_store::Result<(Vec<String>, Vec<String>, usize)> {
            let mut s = store.locked();
            let now = s.now();
            let (terminated, expired) = (s.reap_insolvent(now, grace)?, s.reap_expired(now, ttl)?);
            Ok((terminated, expired, s.reap_mcp_tasks()?))
        })
        .await;
        let a = agents.clone();
        let sandboxes = agents.sandboxes().clone();
        let swept_agents = tokio::task::spawn_blocking(move || {
            let ended = a.sweep();
            a.renew_leases();
            let repaired = a.repair_some_bindings(REPAIR_SLICE);
            a.schedule_all();
            (ended, repaired)
        })
        .await;
        match swept_agents {
            Ok((ended, repaired)) => {
                match ended {
                    Ok(ended) => {
                        for id in ended {
                            tracing::info!(transfer = %id, "released its agent's carrier: the transfer is no longer active");
                        }
                    }
                    Err(e) => tracing::error!("carrier sweep failed: {e}"),
                }
                // Each transfer bound is logged by the repair itself.
                if let Err(e) = repaired {
                    tracing::error!("binding repair failed: {e}");
                }
            }
            Err(e) => tracing::error!("carrier sweep task failed: {e}"),
        }
        match tokio::task::spawn_blocking(move || sandboxes.drop_finished()).await {
            Ok(Ok(dropped)) => {
                for id in dropped {
                    tracing::info!(transfer = %id, "dropped its sandbox: the transfer is no longer active");
                }
            }
            Ok(Err(e)) => tracing::error!("sandbox sweep failed: {e}"),
            Err(e) => tracing::error!("sandbox sweep task failed: {e}"),
        }
        let parked = agents.sandboxes().park_idle(std::time::Instant::now());
        if !parked.is_empty() {
            tracing::info!(parked = parked.len(), "parked idle agents' sandboxes");
        }
        match swept {
            Ok(Ok((terminated, expired, tasks))) => {
                for id in terminated {
                    tracing::info!(transfer = %id, "terminated: insolvent past the grace period");
                }
                for id in expired {
                    tracing::info!(transfer = %id, "expired: not activated within the TTL");
                }
                if tasks > 0 {
                    tracing::info!(tasks, "deleted MCP tasks past their TTL");
                }
            }
            Ok(Err(e)) => tracing::error!("reaper sweep failed: {e}"),
            Err(e) => tracing::error!("reaper task failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_goal_quiet_period_is_one_second_to_a_day() {
        assert_eq!(parse_goal_quiet_period("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_goal_quiet_period("24h"), Ok(Duration::from_secs(24 * 3600)));
        assert_eq!(parse_goal_quiet_period("5m"), Ok(Duration::from_secs(300)));
        for bad in ["999ms", "86401s", "0s", "soon"] {
            assert!(parse_goal_quiet_period(bad).is_err(), "{bad}");
        }
    }
}
