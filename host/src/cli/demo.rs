//! `ahp demo`: one transfer's whole life, through the same store functions the MCP tools call.
//!
//! snapshot → token → provision → push → token → activate (the transfer becomes an agent the
//! operator owns) → a conversation: the operator's questions, each answered by a real turn of
//! the forecaster in its sandbox, metered and paid from the budget, until it is spent
//! (`insolvent`) → the reaper after a shortened grace period → `terminated`, then the event log
//! as a table. No spend is invented: every µUSD is fuel the guest burnt or model spend it
//! reported. Lines in `[narrative]` are flavour text about a fictional
//! inventory-forecasting agent, labelled as such: nothing in the mechanism reads or produces
//! them.

use ahp_host::shared_store::StoreLock;
use std::path::PathBuf;
use std::time::Duration;

use ahp_host::guests::FORECASTER_WASM;
use ahp_host::policy::{POLICY_FILE, Policy};
use ahp_store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT};
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
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    budget: u64,
}

/// What the operator asks the agent, in turn.
const QUESTIONS: &[&str] = &[
    "Which SKUs need a reorder this week?",
    "How much SKU-3307 should I order?",
    "And SKU-1042?",
    "What can you answer?",
];

/// Turns whose question, answer and spend the demo prints; later ones are summed up.
const SHOWN_TURNS: u32 = 4;

/// Most turns the demo runs before giving up on spending the budget.
const MAX_TURNS: u32 = 10_000;

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
    let lock = || anyhow::Ok(shared.locked());
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
    let spent = lock()?.get_status(&t)?.budget.map_or(0, |b| b.spent_micro_usd);
    println!("  . metering          compute and model spend the guest ran up while resuming: {spent} µUSD");
    let agent = a.agent_id.clone().context("activation bound no agent")?;
    println!("  . agent             {t} is now agent {agent}, owned by the operator; this host carries it");

    // The operator talks to the agent it now owns: each answer is a real turn in the sandbox,
    // metered and paid from the transfer's budget.
    let operator = Caller::full(OPERATOR_SUBJECT)?;
    let cv = lock()?
        .create_conversation(
            &operator,
            &NewConversation {
                title: "questions for the forecaster".into(),
                agents: vec![agent.clone()],
            },
            "demo-conversation",
        )?
        .value;
    println!("\nConversation {} with {agent}:\n", cv.id);
    let mut n = 5;
    let mut turns = 0_u32;
    let mut asked = QUESTIONS.iter().cycle();
    let status = loop {
        let question = asked.next().expect("cycle never ends");
        let before = lock()?.budget(&t)?.map_or(0, |b| b.spent_micro_usd);
        let posted = lock()?
            .post_message(
                &operator,
                &NewMessage {
                    conversation: cv.id.clone(),
                    acting: Acting::Human,
                    body: (*question).into(),
                    reply_to: None,
                    idempotency: IdempotencyKey::Key(format!("demo-{turns}")),
                },
            )?
            .value;
        let drive = host.agents().drive(&agent)?;
        turns += 1;
        let transfer = lock()?.transfer(&t)?;
        let b = lock()?.budget(&t)?.context("the transfer has a budget")?;
        let compute = Tier::Nano.limits().compute_cost_micro_usd(drive.fuel_consumed);
        let reply = lock()?
            .read_transcript(&operator, &Acting::Human, &cv.id, posted.seq, 1)?
            .into_iter()
            .next();
        if turns <= SHOWN_TURNS {
            println!("    operator: {question}");
            match &reply {
                Some(r) => println!("    {agent}: {}", r.body),
                None => println!("    ({agent} did not answer)"),
            }
            step(
                n,
                "turn",
                &transfer,
                &format!(
                    "{} fuel ≈ {compute} µUSD compute; turn spent {} µUSD → {}/{}",
                    drive.fuel_consumed,
                    b.spent_micro_usd - before,
                    b.spent_micro_usd,
                    b.allocated_micro_usd
                ),
            );
            n += 1;
        }
        if transfer.status.is_terminal()
            || transfer.status == ahp_store::TransferStatus::Insolvent
            || turns >= MAX_TURNS
        {
            break (transfer, b);
        }
    };
    if turns > SHOWN_TURNS {
        step(
            n,
            "turns",
            &status.0,
            &format!(
                "{} more real turns (the same questions again) until the budget ran out: spent {}/{}",
                turns - SHOWN_TURNS,
                status.1.spent_micro_usd,
                status.1.allocated_micro_usd
            ),
        );
        n += 1;
    }
    anyhow::ensure!(
        status.0.status == ahp_store::TransferStatus::Insolvent,
        "the agent answered {turns} questions without spending its budget; run with a smaller --budget"
    );
    let mut store = lock()?;
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
