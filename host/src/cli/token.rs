//! `ahp token issue`: mint a single-use transfer token. The only way to get one besides the
//! library function — no MCP tool mints tokens.

use std::time::Duration;

use ahp_store::{TokenScope, issue_transfer_token};
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
    },
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
    let TokenCommand::Issue { transfer, scope, ttl } = command;
    let store = dir.open_store()?;
    let t = store.transfer(&transfer)?;
    if t.status.is_terminal() {
        bail!("transfer {transfer} is {}; no token can move it any more", t.status);
    }
    let key = dir.token_key()?;
    println!(
        "{}",
        issue_transfer_token(&key, &transfer, scope.into(), store.now(), ttl)?
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
