//! `ahp transfer list|show|report-usage|terminate`: what an operator needs to see, meter and
//! end transfers. The CLI is the operator: it acts on every principal's transfers.

use ahp_host::carrier::NoCarriers;
use ahp_host::ops::Ops;
use ahp_host::policy::{Origin, Policy};
use ahp_store::{EventPage, Transfer, TransferOwner, TransferStatus};
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
    /// value) with what the operator's policy grants them, and the newest page of its event log
    /// (with the command that shows the page before it).
    Show {
        /// The transfer (tr_…).
        id: String,
        /// How many events, the newest first counted (1 to 500).
        #[arg(long, default_value_t = ahp_store::DEFAULT_EVENT_PAGE_LIMIT as u16,
              value_parser = clap::value_parser!(u16).range(1..=ahp_store::MAX_EVENT_PAGE_LIMIT as i64))]
        limit: u16,
        /// Only events older than this event id (as the previous page says).
        #[arg(long)]
        before: Option<i64>,
        /// Print the status report as JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Add spend to any principal's transfer, as `report_usage` does for the transfer's owner:
    /// the operator's metering surface (an API key reports only on its own transfers).
    ReportUsage {
        /// The transfer (tr_…).
        id: String,
        /// Spend to add, in micro-USD (1 to 1,000,000,000).
        #[arg(long)]
        amount: u64,
        /// What was spent on (a-z, 0-9, '_'; not the host-reserved `compute`).
        #[arg(long, default_value = ahp_store::DEFAULT_USAGE_KIND)]
        kind: String,
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
        TransferCommand::Show {
            id,
            limit,
            before,
            json,
        } => {
            let page = EventPage {
                limit: limit.into(),
                before,
            };
            let report = Ops::new(&mut store, &NoCarriers)
                .transfers()
                .status(&TransferOwner::Operator, &id, page)?;
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
                let calls = store.model_calls(&id, MODEL_CALLS_SHOWN)?;
                if !calls.is_empty() {
                    println!("model calls (newest {MODEL_CALLS_SHOWN})");
                }
                print!("{}", table::model_calls(&calls));
                println!();
                print!("{}", table::events(&report.page.events));
                if let Some(older) = report.page.next_before {
                    println!("older events: ahp transfer show {id} --before {older}");
                }
            }
        }
        TransferCommand::ReportUsage { id, amount, kind } => {
            let r = store.report_client_usage(&id, amount, &kind)?;
            println!(
                "{} {} spent {} of {} µUSD",
                r.transfer.id, r.transfer.status, r.budget.spent_micro_usd, r.budget.allocated_micro_usd
            );
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

/// Model calls `ahp transfer show` lists: the newest.
const MODEL_CALLS_SHOWN: usize = 20;
