//! `ahp conversation list|show`: conversations and transcripts, read as the operator.
//!
//! The operator is trusted with the whole database, so these span every principal; they never
//! show a principal, digest, idempotency key or consume token.

use ahp_store::conversation::{Author, TranscriptMessage};
use clap::Subcommand;

use super::{DataDir, table};

#[derive(Debug, Subcommand)]
pub(crate) enum ConversationCommand {
    /// List conversations by id.
    List {
        /// Start after this conversation id (the last one of the previous page).
        #[arg(long)]
        after: Option<String>,
        /// At most this many (1 to 200).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=200))]
        limit: u16,
    },
    /// Show one conversation: its participants and transcript.
    Show {
        /// The conversation (cv_…).
        id: String,
        /// Only messages after this seq.
        #[arg(long, default_value_t = 0)]
        after_seq: u64,
        /// At most this many messages (1 to 200).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(1..=200))]
        limit: u16,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn author(m: &TranscriptMessage) -> String {
    match &m.author {
        Author::Human => "human".to_owned(),
        Author::Agent {
            agent_id, generation, ..
        } => format!("{agent_id} (gen {generation})"),
    }
}

pub(crate) fn run(dir: &DataDir, command: ConversationCommand) -> anyhow::Result<()> {
    let mut store = dir.open_store()?;
    match command {
        ConversationCommand::List { after, limit } => {
            let rows: Vec<Vec<String>> = store
                .operator_conversations(after.as_deref(), limit.into())?
                .iter()
                .map(|c| {
                    vec![
                        c.id.clone(),
                        c.state.to_string(),
                        c.agents.len().to_string(),
                        c.message_count.to_string(),
                        c.title.clone(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table::render(&["id", "state", "agents", "messages", "title"], &rows)
            );
        }
        ConversationCommand::Show {
            id,
            after_seq,
            limit,
            json,
        } => {
            let (c, messages) = store.operator_conversation(&id, after_seq, limit.into())?;
            if json {
                let value = serde_json::json!({ "conversation": c, "messages": messages });
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                println!("conversation  {}", c.id);
                println!("title         {}", c.title);
                println!("state         {}", c.state);
                println!("agents        {}", c.agents.join(", "));
                println!("messages      {}", c.message_count);
                println!();
                for m in &messages {
                    println!("#{} {} {}", m.seq, m.created_at, author(m));
                    for line in m.body.lines() {
                        println!("    {line}");
                    }
                }
            }
        }
    }
    Ok(())
}
