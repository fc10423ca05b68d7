//! `ahp demo`: one transfer's whole life, through the same store functions the MCP tools call.
//!
//! snapshot → token → provision → push → token → activate → usage until `insolvent` → the
//! reaper after a shortened grace period → `terminated`, then the event log as a table. Lines
//! in `[narrative]` are the seed's flavour text about a fictional inventory-forecasting agent,
//! labelled as such: nothing in the mechanism reads or produces them.

use std::path::PathBuf;
use std::time::Duration;

use ahp_store::{
    DEFAULT_TOKEN_TTL, McpServer, Message, SnapshotInput, Store, Tier, TokenScope, Transfer, issue_transfer_token,
};
use anyhow::Context;
use clap::Args;
use serde_json::json;

use super::{DataDir, table};

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Grace period between `insolvent` and the reaper's termination (shortened for the demo).
    #[arg(long, default_value = "2s", value_parser = super::parse_duration)]
    grace: Duration,
    /// Budget of the destination, in micro-USD.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    budget: u64,
}

/// The snapshot the demo's fictional source session hands over.
fn snapshot() -> SnapshotInput {
    SnapshotInput {
        source_host: "laptop-7".into(),
        system_prompt: "You are an inventory-forecasting agent for a small hardware store. \
                        Forecast next week's demand per SKU and flag reorders."
            .into(),
        message_history: vec![
            Message {
                role: "user".into(),
                content: "Forecast next week for the fastener aisle.".into(),
            },
            Message {
                role: "assistant".into(),
                content: "Pulling 8 weeks of sales for 3 SKUs.".into(),
            },
            Message {
                role: "tool".into(),
                content: r#"{"rows": 24, "source": "inventory-api"}"#.into(),
            },
        ],
        tool_state: json!({
            "inventory": { "SKU-1042": 40, "SKU-2210": 12, "SKU-3307": 0 },
            "weeklySales": { "SKU-1042": [31, 28, 35, 30], "SKU-2210": [9, 11, 8, 12], "SKU-3307": [4, 6, 5, 7] },
            "horizonDays": 7
        }),
        mcp_config: vec![McpServer {
            server: "https://inventory.example.com/mcp".into(),
            cred_ref: "inventory-api".into(),
        }],
    }
}

fn step(n: usize, operation: &str, t: &Transfer, note: &str) {
    println!("{n:>2}. {operation:<18} {}  {:<12} {note}", t.id, t.phase().to_string());
}

fn narrative(text: &str) {
    println!("    [narrative] {text}");
}

pub(crate) fn run(data_dir: Option<PathBuf>, args: DemoArgs) -> anyhow::Result<()> {
    // A throwaway directory unless the operator names one; kept alive until the demo ends.
    let temp = match data_dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().context("creating a temporary data directory")?),
    };
    let dir = DataDir::at(data_dir.unwrap_or_else(|| temp.as_ref().expect("set above").path().to_path_buf()))?;
    let mut store = dir.open_store()?;
    let key = dir.token_key()?;
    let token = |store: &Store, t: &str, scope| issue_transfer_token(&key, t, scope, store.now(), DEFAULT_TOKEN_TTL);

    println!("ahp demo — data directory {}", dir.path().display());
    println!("Lines marked [narrative] are flavour text about a fictional agent, not system claims.\n");
    narrative("laptop-7 is about to sleep; its inventory-forecasting agent has work left to do.");

    let staged = store.snapshot_state(&snapshot())?;
    let t = staged.id.clone();
    step(
        1,
        "snapshot_state",
        &staged,
        &format!("checksum {}…", &staged.checksum[..16]),
    );

    let tok = token(&store, &t, TokenScope::ProvisionRuntime)?;
    println!("  . token issue       scope provision_runtime, single use, expires in 5m");
    let p = store.provision_runtime(&t, Tier::Nano, args.budget, "forecaster", &tok)?;
    step(
        2,
        "provision_runtime",
        &p,
        &format!("tier nano, budget {} µUSD", args.budget),
    );

    let p = store.push_state(&t, Some(&staged.checksum))?;
    step(3, "push_state", &p, "checksum verified");

    let tok = token(&store, &t, TokenScope::Activate)?;
    println!("  . token issue       scope activate, single use, expires in 5m");
    store.begin_activation(&t, &tok)?;
    // This build has no sandbox yet: the demo itself stands in for the guest confirming resume.
    let a = store.complete_activation(&t)?;
    step(
        4,
        "activate",
        &a,
        "resume confirmed by the demo (no wasm sandbox in this build)",
    );
    narrative("the sandbox picks up the forecast where the laptop left off.");

    let mut n = 5;
    let mut spends = [("compute", 40), ("model_tokens", 120)].into_iter().cycle();
    loop {
        let (kind, amount) = spends.next().expect("cycle never ends");
        let r = store.report_usage(&t, amount, kind)?;
        let b = r.budget;
        step(
            n,
            "report_usage",
            &r.transfer,
            &format!(
                "{kind} +{amount} µUSD → spent {}/{}",
                b.spent_micro_usd, b.allocated_micro_usd
            ),
        );
        n += 1;
        if r.transfer.status.is_terminal() || b.is_exhausted() {
            break;
        }
    }
    narrative("the budget is spent; the grace period starts.");

    std::thread::sleep(args.grace);
    let ended = store.reap_insolvent(store.now(), args.grace)?;
    anyhow::ensure!(
        ended.contains(&t),
        "the reaper did not terminate {t} after the grace period"
    );
    let done = store.transfer(&t)?;
    step(
        n,
        "reap_insolvent",
        &done,
        &format!("after a {}s grace period", args.grace.as_secs_f64()),
    );

    println!("\nEvent log of {t}:\n");
    print!("{}", table::events(&store.get_status(&t)?.events));
    Ok(())
}
