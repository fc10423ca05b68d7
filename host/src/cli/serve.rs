//! `ahp serve`: the MCP transfer server, plus the reapers on an interval.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp_host::activation::NoSandbox;
use ahp_host::mcp::{TransferTools, serve_stdio};
use ahp_store::Store;
use clap::Args;

use super::DataDir;

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve MCP over stdin/stdout (the local operator's transport).
    #[arg(long, required = true)]
    stdio: bool,
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

pub(crate) fn run(dir: &DataDir, args: ServeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(!args.reap_every.is_zero(), "--reap-every must be longer than zero");
    let store = Arc::new(Mutex::new(dir.open_store()?));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let reaper = tokio::spawn(reap_forever(store.clone(), args.reap_every, args.ttl, args.grace));
        let tools = TransferTools::new(store, Arc::new(NoSandbox));
        let served = serve_stdio(tools).await;
        reaper.abort();
        served
    })?;
    Ok(())
}

/// Sweeps both reapers every `every`, logging what they ended. Errors are logged, not fatal:
/// the next tick tries again.
async fn reap_forever(store: Arc<Mutex<Store>>, every: Duration, ttl: Duration, grace: Duration) {
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
