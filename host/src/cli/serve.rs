//! `ahp serve`: the MCP transfer server over stdio and/or HTTP, plus the reapers on an interval.
//!
//! With `--stdio` the server runs until the stdio client disconnects; with only `--http` it runs
//! until SIGINT or SIGTERM. Logs go to stderr, never to the stdio MCP stream.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp_host::mcp::http::{self, Auth};
use ahp_host::mcp::{ConversationTools, TransferTools, serve_stdio};
use ahp_host::sandbox::Sandboxes;
use ahp_store::Store;
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
    /// HTTP authorization: bearer API keys of principals, or none (loopback addresses only).
    #[arg(long, value_enum, default_value = "keys")]
    auth: AuthArg,
    /// How often the reapers sweep.
    #[arg(long, default_value = "1m", value_parser = super::parse_duration)]
    reap_every: Duration,
    /// Unactivated transfers older than this expire.
    #[arg(long, default_value = "1h", value_parser = super::parse_duration)]
    ttl: Duration,
    /// Insolvent transfers are terminated after this grace period.
    #[arg(long, default_value = "15m", value_parser = super::parse_duration)]
    grace: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Surface {
    /// The transfer tools (`snapshot_state` … `get_status`).
    Transfers,
    /// The conversation tools (agents, conversations, inboxes, wakes).
    Conversations,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AuthArg {
    /// `Authorization: Bearer <api key>` of a principal (`ahp principal add`).
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
    let (store, sandboxes) = dir.open_host()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let reaper = tokio::spawn(reap_forever(
            store.clone(),
            sandboxes.clone(),
            args.reap_every,
            args.ttl,
            args.grace,
        ));
        let tools = TransferTools::new(store.clone(), sandboxes);
        let http_server = match args.http {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                let local = listener.local_addr()?;
                // Not `eprintln!`: it panics when stderr is closed.
                let _ = writeln!(std::io::stderr(), "ahp: MCP over HTTP at http://{local}/mcp");
                let router = http::router(tools.clone(), store.clone(), auth, local);
                Some(tokio::spawn(http::serve(listener, router, shutdown_signal())))
            }
            None => None,
        };
        let result = match (args.stdio, http_server) {
            (true, server) => {
                let served = match args.surface {
                    Surface::Transfers => serve_stdio(tools).await,
                    Surface::Conversations => serve_stdio(ConversationTools::new(store.clone(), true)).await,
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
        result
    })?;
    Ok(())
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

/// Sweeps both reapers every `every`, logging what they ended, then drops the live sandboxes of
/// transfers that are no longer `active`. Errors are logged, not fatal: the next tick tries again.
async fn reap_forever(
    store: Arc<Mutex<Store>>,
    sandboxes: Arc<Sandboxes>,
    every: Duration,
    ttl: Duration,
    grace: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let store = store.clone();
        let swept = tokio::task::spawn_blocking(move || -> ahp_store::Result<(Vec<String>, Vec<String>)> {
            let mut s = store
                .lock()
                .map_err(|_| ahp_store::Error::invalid("store", "poisoned by a panic"))?;
            let now = s.now();
            Ok((s.reap_insolvent(now, grace)?, s.reap_expired(now, ttl)?))
        })
        .await;
        let sandboxes = sandboxes.clone();
        match tokio::task::spawn_blocking(move || sandboxes.drop_finished()).await {
            Ok(Ok(dropped)) => {
                for id in dropped {
                    tracing::info!(transfer = %id, "dropped its sandbox: the transfer is no longer active");
                }
            }
            Ok(Err(e)) => tracing::error!("sandbox sweep failed: {e}"),
            Err(e) => tracing::error!("sandbox sweep task failed: {e}"),
        }
        match swept {
            Ok(Ok((terminated, expired))) => {
                for id in terminated {
                    tracing::info!(transfer = %id, "terminated: insolvent past the grace period");
                }
                for id in expired {
                    tracing::info!(transfer = %id, "expired: not activated within the TTL");
                }
            }
            Ok(Err(e)) => tracing::error!("reaper sweep failed: {e}"),
            Err(e) => tracing::error!("reaper task failed: {e}"),
        }
    }
}
