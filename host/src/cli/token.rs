//! `ahp token issue`: mint a single-use transfer token. The only way to get one besides the
//! library function — no MCP tool mints tokens.
//!
//! A `provision_runtime` token may fix the tier (`--tier`), cap the budget (`--max-budget`) and
//! fix the component (`--component`). An `activate` token is bound to the transfer's snapshot
//! checksum unless `--any-checksum` is given, so it cannot activate a snapshot other than the
//! one the operator saw.

use std::time::Duration;

use ahp_store::{Tier, TokenBindings, TokenScope, issue_bound_transfer_token};
use anyhow::bail;
use clap::{Subcommand, ValueEnum};

use super::DataDir;

#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Mint a token for one operation on one transfer; prints only the token on stdout.
    Issue {
        /// The transfer the token is for (tr_…).
        #[arg(long)]
        transfer: String,
        /// The operation it authorizes.
        #[arg(long, value_enum)]
        scope: Scope,
        /// How long it stays valid (at most 1h; the default is the store's DEFAULT_TOKEN_TTL).
        #[arg(long, default_value = "5m", value_parser = super::parse_duration)]
        ttl: Duration,
        /// provision_runtime only: the one tier it may pick (nano, small, large).
        #[arg(long, value_parser = parse_tier)]
        tier: Option<Tier>,
        /// provision_runtime only: the largest budget it may open, micro-USD.
        #[arg(long, value_name = "MICRO_USD")]
        max_budget: Option<u64>,
        /// provision_runtime only: the one component (name or digest, as the caller will send
        /// it) it may record.
        #[arg(long)]
        component: Option<String>,
        /// activate only: do not bind the token to the transfer's current snapshot checksum.
        #[arg(long)]
        any_checksum: bool,
    },
}

fn parse_tier(s: &str) -> Result<Tier, String> {
    s.parse().map_err(|e: ahp_store::tier::UnknownTier| e.to_string())
}

#[derive(Debug, Clone, Copy, ValueEnum)]
#[value(rename_all = "snake_case")]
pub(crate) enum Scope {
    /// `provision_runtime`.
    ProvisionRuntime,
    /// `activate`.
    Activate,
}

impl From<Scope> for TokenScope {
    fn from(s: Scope) -> Self {
        match s {
            Scope::ProvisionRuntime => TokenScope::ProvisionRuntime,
            Scope::Activate => TokenScope::Activate,
        }
    }
}

pub(crate) fn run(dir: &DataDir, command: TokenCommand) -> anyhow::Result<()> {
    let TokenCommand::Issue {
        transfer,
        scope,
        ttl,
        tier,
        max_budget,
        component,
        any_checksum,
    } = command;
    let scope = TokenScope::from(scope);
    let mut store = dir.open_store()?;
    let t = store.transfer(&transfer)?;
    if t.status.is_terminal() {
        bail!("transfer {transfer} is {}; no token can move it any more", t.status);
    }
    let provision_flags = tier.is_some() || max_budget.is_some() || component.is_some();
    match scope {
        TokenScope::Activate if provision_flags => {
            bail!("--tier, --max-budget and --component bind only --scope provision_runtime tokens")
        }
        TokenScope::ProvisionRuntime if any_checksum => bail!("--any-checksum applies only to --scope activate"),
        _ => {}
    }
    let bindings = TokenBindings {
        tier,
        max_budget_micro_usd: max_budget,
        component,
        checksum: (scope == TokenScope::Activate && !any_checksum).then(|| t.checksum.clone()),
    };
    let key = dir.token_key()?;
    println!(
        "{}",
        issue_bound_transfer_token(&key, &transfer, scope, store.now(), ttl, &bindings)?
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ttl_flag_default_is_the_store_default() {
        assert_eq!(crate::cli::parse_duration("5m"), Ok(ahp_store::DEFAULT_TOKEN_TTL));
    }
}
