//! `ahp agent list`: every agent in the data directory, read as the operator; `ahp agent move`:
//! the operator moves a running agent to another host of a shared database (there is no MCP
//! tool for it: a move is the operator's, through the database the operator holds); and `ahp
//! agent new`, which writes a project and needs no data directory: [`agent_new`](super::agent_new);
//! `ahp agent inbox` and `ahp agent skip`: the messages waiting for an agent, with how many
//! turns already failed on each, and skipping the one it is stuck on.
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
    /// The messages waiting in an agent's inbox, oldest first, with how many turns already
    /// read each and ended without answering it (`tries`): a message with tries is one the agent
    /// keeps failing on.
    Inbox {
        /// The agent (`agt_…`).
        agent: String,
        /// Start after this delivery order (the last one of the previous page).
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// At most this many (1 to 200).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_LIST)))]
        limit: u16,
    },
    /// Skip a message waiting in an agent's inbox: it is consumed without an answer (audited
    /// as skipped), and the agent's next turn goes on with the messages after it.
    Skip {
        /// The agent (`agt_…`).
        agent: String,
        /// The message (`msg_…`) to skip.
        message: String,
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
        AgentCommand::Inbox { agent, after, limit } => {
            let rows: Vec<Vec<String>> = store
                .operator_queued_deliveries(&agent, after, limit.into())?
                .iter()
                .map(|d| {
                    vec![
                        d.delivery_order.to_string(),
                        d.message.id.clone(),
                        d.message.conversation_id.clone(),
                        d.tries.to_string(),
                        d.created_at.to_string(),
                        super::terminal::shown(&preview(&d.message.body)).into_owned(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table::render(&["order", "message", "conversation", "tries", "queued", "body"], &rows)
            );
        }
        AgentCommand::Skip { agent, message } => {
            let skipped = store.operator_skip_delivery(&agent, &message)?;
            if skipped.state_changed {
                println!("skipped {message}: the agent's next turn goes on after it");
            } else {
                println!("{message} was already handled: nothing to skip");
            }
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

/// Longest body preview `ahp agent inbox` prints, in characters.
const PREVIEW_CHARS: usize = 60;

/// The first [`PREVIEW_CHARS`] characters of `body` on one line.
fn preview(body: &str) -> String {
    let line: String = body.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match line.char_indices().nth(PREVIEW_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}
