//! `ahp demo`: one transfer's whole life, through the same store functions the MCP tools call.
//!
//! snapshot → token → provision → push → token → activate → usage until `insolvent` → the
//! reaper after a shortened grace period → `terminated`, then the event log as a table. Lines
//! in `[narrative]` are the seed's flavour text about a fictional inventory-forecasting agent,
//! labelled as such: nothing in the mechanism reads or produces them.

use std::path::PathBuf;
use std::time::Duration;

use ahp_host::guests::FORECASTER_WASM;
use ahp_host::policy::{POLICY_FILE, Policy};
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
            "inventory": [
                { "sku": "SKU-1042", "onHand": 40, "dailySales": [5, 4, 6, 5, 4, 6, 5], "leadTimeDays": 7 },
                { "sku": "SKU-2210", "onHand": 12, "dailySales": [1, 2, 1, 2, 1, 2, 1], "leadTimeDays": 5 },
                { "sku": "SKU-3307", "onHand": 0, "dailySales": [1, 0, 1, 1, 0, 1, 1], "leadTimeDays": 10 }
            ]
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
    if !dir.path().join(POLICY_FILE).exists() {
        // The operator's side of the demo: the inventory server may be reached, with the
        // credential bound to it and revealed to the forecaster (which checks it is there).
        let policy: Policy = serde_json::from_value(json!({ "servers": [{
            "server": "https://inventory.example.com",
            "credential": { "credRef": "inventory-api", "reveal": true },
        }]}))?;
        policy.save(dir.path())?;
    }
    let host = dir.open_host()?;
    let (shared, sandboxes) = (host.store().clone(), host.sandboxes().clone());
    let key = dir.token_key()?;
    // The credential the snapshot refers to, as the destination's vault holds it.
    write_private(&dir.vault_dir().join("inventory-api"), b"demo-inventory-api-key")?;
    let lock = || shared.lock().map_err(|_| anyhow::anyhow!("the store lock is poisoned"));
    let token = |store: &Store, t: &str, scope| issue_transfer_token(&key, t, scope, store.now(), DEFAULT_TOKEN_TTL);

    println!("ahp demo — data directory {}", dir.path().display());
    println!("Lines marked [narrative] are flavour text about a fictional agent, not system claims.\n");
    let component = sandboxes.register_component(FORECASTER_WASM, Some("forecaster"))?;
    println!(
        "registered the forecaster guest: {} ({} bytes)\n",
        component.digest, component.size_bytes
    );
    narrative("laptop-7 is about to sleep; its inventory-forecasting agent has work left to do.");

    let mut store = lock()?;
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
    drop(store); // the sandbox takes the store lock around its own commits
    let a = host.activate_checked(&t, &tok)?;
    let guest_said = sandboxes.guest_log(&t).unwrap_or_default();
    step(
        4,
        "activate",
        &a,
        &format!("guest resumed in a wasm sandbox and said: {}", guest_said.trim()),
    );
    narrative("the sandbox picks up the forecast where the laptop left off.");
    let mut store = lock()?;
    let spent = store.get_status(&t)?.budget.map_or(0, |b| b.spent_micro_usd);
    println!("  . metering          compute and model spend the guest ran up while resuming: {spent} µUSD");

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
    let now = store.now();
    let ended = store.reap_insolvent(now, args.grace)?;
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

/// Writes `bytes` to `path` readable by the owner only.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(path).with_context(|| format!("writing {}", path.display()))?;
    f.write_all(bytes)?;
    Ok(())
}
