//! `ahp transfer list|show|terminate`: what an operator needs to see and end transfers.

use ahp_store::{Transfer, TransferStatus};
use clap::Subcommand;

use super::{DataDir, table};

#[derive(Debug, Subcommand)]
pub(crate) enum TransferCommand {
    /// List transfers, newest first.
    List {
        /// Only transfers with this status (staged, provisioned, pushed, active, insolvent,
        /// terminated, expired).
        #[arg(long, value_parser = parse_status)]
        status: Option<TransferStatus>,
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: u16,
    },
    /// Show one transfer: its state, budget and full event log.
    Show {
        /// The transfer (tr_…).
        id: String,
        /// Print the status report as JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Tear a transfer down (an operator action; never available over MCP).
    Terminate {
        /// The transfer (tr_…).
        id: String,
        /// Why, recorded in the audit log (1 to 1024 bytes).
        #[arg(long)]
        reason: String,
    },
}

fn parse_status(s: &str) -> Result<TransferStatus, String> {
    s.parse().map_err(|e: ahp_store::state::UnknownStatus| e.to_string())
}

pub(crate) fn run(dir: &DataDir, command: TransferCommand) -> anyhow::Result<()> {
    let mut store = dir.open_store()?;
    match command {
        TransferCommand::List { status, limit } => {
            let rows: Vec<Vec<String>> = store
                .list_transfers(status, limit.into())?
                .iter()
                .map(|t| {
                    vec![
                        t.id.clone(),
                        t.phase().to_string(),
                        t.tier.map_or("-".into(), |x| x.to_string()),
                        t.source_host.clone(),
                        t.created_at.to_string(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table::render(&["id", "status", "tier", "source", "created"], &rows)
            );
        }
        TransferCommand::Show { id, json } => {
            let report = store.get_status(&id)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", summary(&report.transfer));
                if let Some(b) = report.budget {
                    println!(
                        "budget     {} µUSD allocated, {} spent, {} remaining ({} µUSD per CPU-second)",
                        b.allocated_micro_usd,
                        b.spent_micro_usd,
                        b.remaining_micro_usd(),
                        b.rate_micro_usd_per_cpu_second
                    );
                }
                println!();
                print!("{}", table::events(&report.events));
            }
        }
        TransferCommand::Terminate { id, reason } => {
            let t = store.terminate(&id, &reason)?;
            println!("{} {}", t.id, t.status);
        }
    }
    Ok(())
}

/// The transfer's fields, one per line.
pub(crate) fn summary(t: &Transfer) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    format!(
        "transfer   {}\nstatus     {}\nsource     {}\nchecksum   {}\ntier       {}\ncomponent  {}\ncreated    {}\n",
        t.id,
        t.phase(),
        t.source_host,
        t.checksum,
        opt(t.tier.map(|x| x.to_string())),
        opt(t.component.clone()),
        t.created_at,
    )
}
