//! `ahp principal add|list|revoke`: the API keys of the HTTP transport.

use ahp_store::ApiScope;
use clap::Subcommand;

use super::{DataDir, table};

#[derive(Debug, Subcommand)]
pub(crate) enum PrincipalCommand {
    /// Create a principal; prints only its new API key on stdout (shown this once, stored hashed).
    Add {
        /// Its name: a-z, 0-9, '.', '_', '-' (at most 64 bytes).
        name: String,
        /// Scopes it holds: transfer:read (get_status), transfer:write (the other tools).
        #[arg(long = "scope", required = true, num_args = 1.., value_parser = parse_scope)]
        scopes: Vec<ApiScope>,
    },
    /// List principals.
    List,
    /// Revoke a principal; its key stops working at once.
    Revoke {
        /// Its name.
        name: String,
    },
}

fn parse_scope(s: &str) -> Result<ApiScope, String> {
    s.parse().map_err(|e: ahp_store::Error| e.to_string())
}

pub(crate) fn run(dir: &DataDir, command: PrincipalCommand) -> anyhow::Result<()> {
    let mut store = dir.open_store()?;
    match command {
        PrincipalCommand::Add { name, scopes } => {
            let (_, key) = store.add_principal(&name, &scopes)?;
            println!("{key}");
        }
        PrincipalCommand::List => {
            let rows: Vec<Vec<String>> = store
                .list_principals()?
                .into_iter()
                .map(|p| {
                    vec![
                        p.name,
                        p.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "),
                        p.created_at.to_string(),
                        p.revoked_at.map_or("-".into(), |t| format!("revoked {t}")),
                    ]
                })
                .collect();
            print!("{}", table::render(&["name", "scopes", "created", "revoked"], &rows));
        }
        PrincipalCommand::Revoke { name } => {
            let p = store.revoke_principal(&name)?;
            println!("{} revoked", p.name);
        }
    }
    Ok(())
}
