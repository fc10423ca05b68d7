//! `ahp reap`: one sweep of both reapers, for cron. Prints one line per transfer it ended.

use std::time::Duration;

use clap::Args;

use super::DataDir;

#[derive(Debug, Args)]
pub(crate) struct ReapArgs {
    /// Unactivated transfers older than this expire (the store's DEFAULT_TRANSFER_TTL).
    #[arg(long, default_value = "1h", value_parser = super::parse_duration)]
    pub(crate) ttl: Duration,
    /// Insolvent transfers are terminated after this grace period (DEFAULT_GRACE_PERIOD).
    #[arg(long, default_value = "15m", value_parser = super::parse_duration)]
    pub(crate) grace: Duration,
}

pub(crate) fn run(dir: &DataDir, args: ReapArgs) -> anyhow::Result<()> {
    let mut store = dir.open_store()?;
    let now = store.now();
    for id in store.reap_insolvent(now, args.grace)? {
        println!("{id} terminated (insolvent past the grace period)");
    }
    for id in store.reap_expired(now, args.ttl)? {
        println!("{id} expired (not activated within the TTL)");
    }
    let tasks = store.reap_mcp_tasks()?;
    if tasks > 0 {
        println!("{tasks} MCP tasks deleted (past their TTL)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ahp_store::{DEFAULT_GRACE_PERIOD, DEFAULT_TRANSFER_TTL};

    #[test]
    fn flag_defaults_are_the_store_defaults() {
        assert_eq!(crate::cli::parse_duration("1h"), Ok(DEFAULT_TRANSFER_TTL));
        assert_eq!(crate::cli::parse_duration("15m"), Ok(DEFAULT_GRACE_PERIOD));
    }
}
