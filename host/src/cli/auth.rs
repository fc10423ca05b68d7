//! `ahp auth issuer add|list|remove`: the OAuth authorization servers whose access tokens the
//! HTTP transport accepts beside API keys (`mcp::oauth`).

use ahp_store::ApiScope;
use ahp_store::issuer::SIGNING_ALGORITHMS;
use clap::Subcommand;

use super::{DataDir, table};

#[derive(Debug, Subcommand)]
pub(crate) enum AuthCommand {
    /// The authorization servers whose access tokens are accepted.
    #[command(subcommand)]
    Issuer(IssuerCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum IssuerCommand {
    /// Accept access tokens (JWTs) of ISSUER from now on: signed by a key of its JWKS, for this
    /// server's resource URI (`aud`), unexpired; each token subject becomes a principal.
    Add {
        /// The issuer, exactly as its tokens' `iss` spells it (https; http only on loopback).
        issuer: String,
        /// Where its signing keys are published [default: the `jwks_uri` of its metadata,
        /// /.well-known/oauth-authorization-server or /.well-known/openid-configuration].
        #[arg(long, value_name = "URL")]
        jwks_uri: Option<String>,
        /// The algorithms its tokens may be signed with (asymmetric: RS*, PS*, ES256, ES384,
        /// EdDSA); any other is refused.
        #[arg(long = "algorithm", num_args = 1.., default_values = ["RS256", "ES256"], value_parser = parse_algorithm)]
        algorithms: Vec<String>,
        /// The most scopes its tokens may grant (a token's other scopes are ignored).
        #[arg(long = "scope", num_args = 1.., value_parser = parse_scope)]
        scopes: Vec<ApiScope>,
    },
    /// List the issuers.
    List,
    /// Stop accepting ISSUER's tokens at once (the principals its subjects became stay).
    Remove {
        /// The issuer, exactly as added.
        issuer: String,
    },
}

fn parse_scope(s: &str) -> Result<ApiScope, String> {
    s.parse().map_err(|e: ahp_store::Error| e.to_string())
}

fn parse_algorithm(s: &str) -> Result<String, String> {
    if SIGNING_ALGORITHMS.contains(&s) {
        Ok(s.to_owned())
    } else {
        Err(format!("the algorithms are {}", SIGNING_ALGORITHMS.join(", ")))
    }
}

pub(crate) fn run(dir: &DataDir, command: AuthCommand) -> anyhow::Result<()> {
    let AuthCommand::Issuer(command) = command;
    let mut store = dir.open_store()?;
    match command {
        IssuerCommand::Add {
            issuer,
            jwks_uri,
            algorithms,
            scopes,
        } => {
            let scopes = if scopes.is_empty() {
                ApiScope::ALL.to_vec()
            } else {
                scopes
            };
            let added = store.add_token_issuer(&issuer, jwks_uri.as_deref(), &algorithms, &scopes)?;
            println!("{} added", added.issuer);
        }
        IssuerCommand::List => {
            let rows: Vec<Vec<String>> = store
                .list_token_issuers()?
                .into_iter()
                .map(|i| {
                    vec![
                        i.issuer,
                        i.jwks_uri.unwrap_or_else(|| "(from its metadata)".into()),
                        i.algorithms.join(" "),
                        i.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "),
                        i.created_at.to_string(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table::render(&["issuer", "keys", "algorithms", "scopes", "added"], &rows)
            );
        }
        IssuerCommand::Remove { issuer } => {
            let removed = store.remove_token_issuer(&issuer)?;
            println!("{} removed", removed.issuer);
        }
    }
    Ok(())
}
