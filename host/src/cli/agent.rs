//! `ahp agent list`: every agent in the data directory, read as the operator; `ahp agent move`:
//! the operator moves a running agent to another host of a shared database (there is no MCP
//! tool for it: a move is the operator's, through the database the operator holds); and `ahp
//! agent new`, which writes a project and needs no data directory: [`agent_new`](super::agent_new).
//!
//! The operator is trusted with the whole database, so this spans every principal; it shows no
//! principal, digest, key or token, and no description or specialty text (only their counts).

use clap::Subcommand;

use super::{DataDir, table};

/// Most agents one listing prints.
const MAX_LIST: u16 = 200;

#[derive(Debug, Subcommand)]
pub(crate) enum AgentCommand {
    /// Write a ready agent project (source, manifest, README, sample snapshot) from the
    /// templates this binary carries.
    New(super::agent_new::NewArgs),
    /// List agents by id.
    List {
        /// Start after this agent id (the last one of the previous page).
        #[arg(long)]
        after: Option<String>,
        /// At most this many (1 to 200).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_LIST)))]
        limit: u16,
    },
    /// Move a running agent to another live host of the shared database: its host finishes the
    /// current turn and hands it over; the other binds it and serves its queued messages.
    /// Prints the move as JSON.
    Move {
        /// The agent (`agt_…`), a transfer's.
        agent: String,
        /// The host id to move it to.
        #[arg(long = "to", value_name = "HOST")]
        to: String,
    },
}

pub(crate) fn run(dir: &DataDir, command: AgentCommand) -> anyhow::Result<()> {
    let mut store = dir.open_store()?;
    match command {
        AgentCommand::New(_) => unreachable!("handled before a data directory is opened"),
        AgentCommand::List { after, limit } => {
            let rows: Vec<Vec<String>> = store
                .operator_agents(after.as_deref(), limit.into())?
                .iter()
                .map(|a| {
                    vec![
                        a.id.clone(),
                        a.card.handle.clone(),
                        a.card.display_name.clone(),
                        a.profile_revision.to_string(),
                        a.controller_generation.to_string(),
                        a.created_at.to_string(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table::render(&["id", "handle", "name", "revision", "generation", "created"], &rows)
            );
        }
        AgentCommand::Move { agent, to } => {
            let m = store.request_agent_move(&agent, &to)?;
            // Tell the carrying host now rather than at its next poll.
            if let Some(url) = dir.database_url() {
                let signalled = ahp_store_postgres::Signaller::connect(url)
                    .and_then(|mut s| s.send(&format!("host {}", m.from_host)));
                if let Err(e) = signalled {
                    tracing::warn!(error = %e, "the move is recorded; its host sees it at its next poll");
                }
            }
            println!("{}", serde_json::to_string(&m)?);
        }
    }
    Ok(())
}
