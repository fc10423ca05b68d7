//! `ahp transfer list|show|terminate`: what an operator needs to see and end transfers.

use ahp_host::policy::{Origin, Policy};
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
    /// Show one transfer: its state, budget, MCP servers and credential references (never a
    /// value) with what the operator's policy grants them, and the full event log.
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
                print!("{}", servers(&store.snapshot(&id)?.mcp_config, &dir.policy()?));
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

/// The snapshot's MCP servers and credential references (never a value), each with what the
/// operator's policy grants for it.
fn servers(mcp_config: &[ahp_store::McpServer], policy: &Policy) -> String {
    let grants = policy.grants(mcp_config);
    let rows: Vec<Vec<String>> = mcp_config
        .iter()
        .map(|m| {
            let grant = Origin::parse(&m.server).ok().and_then(|o| grants.server(&o).cloned());
            let policy = match grant {
                None => "not reachable: not in the operator's policy".to_owned(),
                Some(g) => match g.credential {
                    Some(c) if c.reveal => "reachable; credential injected and revealed".to_owned(),
                    Some(_) => "reachable; credential injected by the host".to_owned(),
                    None => "reachable; the policy binds no credential to it for this ref".to_owned(),
                },
            };
            vec![m.server.clone(), m.cred_ref.clone(), policy]
        })
        .collect();
    table::render(&["server", "credRef", "policy"], &rows)
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
