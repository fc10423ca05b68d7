//! `ahp demo`: one transfer's whole life, through the same store functions the MCP tools call.
//!
//! snapshot → token → provision → push → token → activate (the transfer becomes an agent the
//! operator owns) → a conversation: the operator's questions, each answered by a real turn of
//! the assistant (`examples/assistant`) in its sandbox — it thinks with a model through the
//! host's gateway and reads the inventory through the MCP tool of its server, both metered and
//! paid from the budget — until the budget is spent (`insolvent`) → the reaper after a
//! shortened grace period → `terminated`, then the model calls and the event log as tables.
//!
//! With nothing configured the demo is self-contained: it starts a real MCP server of its own on
//! loopback (`tools::inventory_server`, the `inventory` tool behind a bearer credential) and a
//! local model endpoint speaking the OpenAI protocol with scripted answers
//! (`gateway::scripted`); both are printed as what they are. `--model-endpoint URL --model NAME
//! [--model-credential-file F] [--provider anthropic]` runs the same cycle against a real
//! provider. No spend is invented: every µUSD is fuel the guest burnt, a model call charged from
//! the provider's usage, or a tool call at the policy's price. Lines in `[narrative]` are
//! flavour text about a fictional inventory-forecasting agent, labelled as such: nothing in the
//! mechanism reads or produces them.

use ahp_host::shared_store::StoreLock;
use std::path::PathBuf;
use std::time::Duration;

use ahp_host::gateway::scripted::{Behaviour, Received, ScriptedPart, ScriptedProvider};
use ahp_host::guests::ASSISTANT_WASM;
use ahp_host::policy::{ModelCredential, ModelPriceRule, ModelRule, POLICY_FILE, Policy, Provider};
use ahp_host::tools::inventory_server::{InventoryServer, Mode};
use ahp_store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT};
use ahp_store::{
    DEFAULT_TOKEN_TTL, McpServer, Message, ModelUsage, SnapshotInput, Store, Tier, TokenScope, Transfer,
    issue_transfer_token,
};
use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};

use super::{DataDir, table};

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Grace period between `insolvent` and the reaper's termination (shortened for the demo).
    #[arg(long, default_value = "2s", value_parser = super::parse_duration)]
    grace: Duration,
    /// Budget of the destination, in micro-USD [default: 60 with the scripted model, 20000
    /// with `--model-endpoint`].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    budget: Option<u64>,
    /// A real model provider's base URL (e.g. `https://api.openai.com/v1`) instead of the
    /// demo's scripted local model.
    #[arg(long, requires = "model")]
    model_endpoint: Option<String>,
    /// The provider's model name (e.g. `gpt-4.1-mini`), with `--model-endpoint`.
    #[arg(long, requires = "model_endpoint")]
    model: Option<String>,
    /// A file holding the provider's API key (put in the host's vault; it never enters the
    /// sandbox). None for an endpoint without a key (a local Ollama).
    #[arg(long, requires = "model_endpoint")]
    model_credential_file: Option<PathBuf>,
    /// The protocol of `--model-endpoint`: `openai` (Chat Completions) or `anthropic` (Messages).
    #[arg(long, default_value = "openai", requires = "model_endpoint")]
    provider: Provider,
}

/// The bearer credential of the demo's inventory server, as the host's vault holds it.
const INVENTORY_CREDENTIAL: &str = "demo-inventory-api-key";

/// What the demo's scripted model costs: priced so low (a thousandth of gpt-4.1-nano's list
/// prices) that a call reserves and costs 1 µUSD, the least charge — as a tool call and a tick
/// of compute do — so real charges spend the budget to its last µUSD (the reservation rule is
/// the same at any price).
const SCRIPTED_PRICES: ModelPriceRule = ModelPriceRule {
    input: 100,
    output: 400,
    cache_read: 0,
    cache_write: 0,
};

/// What a real provider's model costs unless the policy says otherwise (gpt-4.1-mini's list
/// prices).
const PROVIDER_PRICES: ModelPriceRule = ModelPriceRule {
    input: 400_000,
    output: 1_600_000,
    cache_read: 100_000,
    cache_write: 0,
};

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
fn snapshot(inventory_server: &str) -> SnapshotInput {
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
        tool_state: json!({ "model": "default" }),
        mcp_config: vec![McpServer {
            server: inventory_server.into(),
            cred_ref: "inventory-api".into(),
        }],
    }
}

fn step(n: usize, operation: &str, t: &Transfer, note: &str) {
    println!("{n:>2}. {operation:<18} {}  {:<12} {note}", t.id, t.phase().to_string());
}

/// The stock the demo's inventory server holds.
fn inventory() -> Value {
    json!({ "inventory": [
        { "sku": "SKU-1042", "onHand": 40, "dailySales": [5, 4, 6, 5, 4, 6, 5], "leadTimeDays": 7 },
        { "sku": "SKU-2210", "onHand": 12, "dailySales": [1, 2, 1, 2, 1, 2, 1], "leadTimeDays": 5 },
        { "sku": "SKU-3307", "onHand": 0, "dailySales": [1, 0, 1, 1, 0, 1, 1], "leadTimeDays": 10 }
    ]})
}

/// The scripted model's answer to one Chat Completions request: with a tool result as the
/// last message, an answer that quotes it; else, with tools offered, a call of the inventory
/// tool (for the SKU the question names); else a note that it has no tool. It says it is
/// scripted, and reports usage from the request's size.
fn scripted_answer(request: &Received) -> Behaviour {
    let messages = request.body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let tools: Vec<String> = request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    let part = if last["role"] == "tool" {
        let result = last["content"].as_str().unwrap_or_default();
        ScriptedPart::Text(match reorder_sentence(result) {
            Some(sentence) => format!("(scripted model) From the inventory tool: {sentence}"),
            None => format!(
                "(scripted model) The inventory tool answered: {}",
                result.chars().take(200).collect::<String>()
            ),
        })
    } else if let Some(tool) = tools.iter().find(|t| t.contains("inventory")) {
        let question = last["content"].as_str().unwrap_or_default();
        let sku = question
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .find(|w| w.starts_with("SKU-"));
        ScriptedPart::ToolCall {
            name: tool.clone(),
            arguments: sku.map_or_else(|| json!({}), |sku| json!({ "sku": sku })),
        }
    } else {
        ScriptedPart::Text("(scripted model) I have no inventory tool to answer with.".into())
    };
    let output = match &part {
        ScriptedPart::Text(t) => t.len() as u64 / 4 + 1,
        ScriptedPart::ToolCall { .. } => 12,
    };
    Behaviour::Answer {
        parts: vec![part],
        usage: ModelUsage {
            input_tokens: request.bytes as u64 / 4 + 1,
            output_tokens: output,
            ..ModelUsage::default()
        },
    }
}

/// One sentence per SKU of an inventory tool result (`{"inventory": [{"sku", "onHand",
/// "dailySales", "leadTimeDays"}]}`): its stock, its sales rate, and what to reorder to cover
/// its lead time — arithmetic on the tool's numbers, nothing more. `None` for anything else.
fn reorder_sentence(result: &str) -> Option<String> {
    let value: Value = serde_json::from_str(result).ok()?;
    let items = value["inventory"].as_array()?;
    let sentences: Vec<String> = items
        .iter()
        .map(|item| {
            let sku = item["sku"].as_str()?;
            let on_hand = item["onHand"].as_f64()?;
            let lead = item["leadTimeDays"].as_f64()?;
            let sales: Vec<f64> = item["dailySales"].as_array()?.iter().filter_map(Value::as_f64).collect();
            let per_day = sales.iter().sum::<f64>() / sales.len().max(1) as f64;
            // What sells while a reorder is on its way.
            let needed = (per_day * lead).ceil();
            Some(if on_hand < needed {
                format!(
                    "{sku} has {on_hand} on hand and sells {per_day:.1} a day, short of the {needed} its {lead}-day lead time needs: reorder {}",
                    needed - on_hand
                )
            } else {
                format!(
                    "{sku} has {on_hand} on hand, {:.0} days of sales at {per_day:.1} a day against a {lead}-day lead time: no reorder yet",
                    on_hand / per_day.max(f64::MIN_POSITIVE)
                )
            })
        })
        .collect::<Option<_>>()?;
    (!sentences.is_empty()).then(|| format!("{}.", sentences.join("; ")))
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
    anyhow::ensure!(
        !dir.path().join(POLICY_FILE).exists(),
        "{} already holds a policy; the demo writes its own (its servers listen on fresh ports): use a fresh --data-dir",
        dir.path().display()
    );
    // Log lines (warnings, traps and their wasm backtraces) go to a file, out of the story.
    let log = match &temp {
        Some(_) => std::env::temp_dir().join("ahp-demo.log"),
        None => dir.path().join("demo.log"),
    };
    super::log::to_file(&log)?;
    // The demo's own servers, on loopback: a real MCP server with the inventory tool, and (unless
    // a real provider is named) a local model endpoint with scripted answers.
    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the demo's local servers")?;
    let inventory = servers.block_on(InventoryServer::start(INVENTORY_CREDENTIAL, inventory(), Mode::Honest))?;
    let scripted = match &args.model_endpoint {
        Some(_) => None,
        None => {
            let provider = servers.block_on(ScriptedProvider::start())?;
            provider.set_responder(std::sync::Arc::new(scripted_answer));
            Some(provider)
        }
    };
    let (model, budget, tier) = match (&args.model_endpoint, &scripted) {
        (Some(endpoint), _) => (
            ModelRule {
                id: "default".into(),
                provider: args.provider,
                endpoint: endpoint.clone(),
                provider_model: args.model.clone().context("--model names the provider's model")?,
                credential: args.model_credential_file.as_ref().map(|_| ModelCredential {
                    cred_ref: "model-key".into(),
                }),
                context_tokens: 128_000,
                max_output_tokens: 1_024,
                price_micro_usd_per_m_tok: PROVIDER_PRICES,
            },
            args.budget.unwrap_or(20_000),
            // A real model takes seconds: the small tier's 15 s wall clock per turn.
            Tier::Small,
        ),
        (None, Some(provider)) => (
            ModelRule {
                id: "default".into(),
                provider: Provider::Openai,
                endpoint: provider.openai_endpoint(),
                provider_model: "scripted".into(),
                credential: Some(ModelCredential {
                    cred_ref: "model-key".into(),
                }),
                context_tokens: 32_000,
                max_output_tokens: 256,
                price_micro_usd_per_m_tok: SCRIPTED_PRICES,
            },
            args.budget.unwrap_or(60),
            Tier::Nano,
        ),
        (None, None) => unreachable!("the scripted provider starts without --model-endpoint"),
    };
    // The operator's side: the inventory server may be reached (it listens on loopback, so the
    // policy allows 127.0.0.1), its credential injected by the host and never revealed; the
    // model is the operator's, its key in the vault.
    let policy = Policy {
        servers: vec![inventory.policy_rule("inventory-api", 1)],
        allow_networks: vec!["127.0.0.1/32".into()],
        models: vec![model.clone()],
    };
    policy.validate()?;
    policy.save(dir.path())?;
    let host = dir.open_host()?;
    // The credentials the policy refers to, as the destination's vault holds them.
    write_private(&dir.vault_dir().join("inventory-api"), INVENTORY_CREDENTIAL.as_bytes())?;
    match &args.model_credential_file {
        Some(file) => {
            let key = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            write_private(&dir.vault_dir().join("model-key"), key.trim_ascii())?;
        }
        None if scripted.is_some() => write_private(&dir.vault_dir().join("model-key"), b"demo-model-key")?,
        None => {}
    }
    let (shared, sandboxes) = (host.store().clone(), host.sandboxes().clone());
    let key = dir.token_key()?;
    let lock = || anyhow::Ok(shared.locked());
    let token = |store: &Store, t: &str, scope| issue_transfer_token(&key, t, scope, store.now(), DEFAULT_TOKEN_TTL);

    println!("ahp demo — data directory {}", dir.path().display());
    println!("Lines marked [narrative] are flavour text about a fictional agent, not system claims.");
    println!("The host's log goes to {}.\n", log.display());
    println!(
        "  . MCP server        {} — the demo's own inventory server (rmcp, Streamable HTTP, bearer credential)",
        inventory.url()
    );
    match &scripted {
        Some(p) => println!(
            "  . model             {} — a LOCAL SCRIPTED model speaking the OpenAI protocol: it calls the inventory tool, then answers with arithmetic on its result; it does not think",
            p.openai_endpoint()
        ),
        None => println!(
            "  . model             {} {} at {}",
            model.provider.as_str(),
            model.provider_model,
            model.endpoint
        ),
    }
    let component = sandboxes.register_component(ASSISTANT_WASM, Some("assistant"))?;
    println!(
        "registered the assistant guest: {} ({} bytes)\n",
        component.digest, component.size_bytes
    );
    narrative("laptop-7 is about to sleep; its inventory-forecasting agent has work left to do.");

    let mut store = lock()?;
    let staged = store.snapshot_state(&snapshot(&inventory.url()))?;
    let t = staged.id.clone();
    step(
        1,
        "snapshot_state",
        &staged,
        &format!("checksum {}…", &staged.checksum[..16]),
    );

    let tok = token(&store, &t, TokenScope::ProvisionRuntime)?;
    println!("  . token issue       scope provision_runtime, single use, expires in 5m");
    let p = store.provision_runtime(&t, tier, budget, "assistant", &tok)?;
    step(
        2,
        "provision_runtime",
        &p,
        &format!("tier {tier}, budget {budget} µUSD"),
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
        &format!(
            "guest resumed in a wasm sandbox{}",
            match guest_said.trim() {
                "" => String::new(),
                said => format!(" and said: {}", super::terminal::shown(said)),
            }
        ),
    );
    narrative("the sandbox picks up the forecast where the laptop left off.");
    let spent = lock()?.get_status(&t)?.budget.map_or(0, |b| b.spent_micro_usd);
    println!("  . metering          compute the guest ran up while resuming: {spent} µUSD");
    let agent = a.agent_id.clone().context("activation bound no agent")?;
    println!("  . agent             {t} is now agent {agent}, owned by the operator; this host carries it");

    // The operator talks to the agent it now owns: each answer is a real turn in the sandbox,
    // metered and paid from the transfer's budget.
    let operator = Caller::full(OPERATOR_SUBJECT)?;
    let cv = lock()?
        .create_conversation(
            &operator,
            &NewConversation {
                title: "questions for the assistant".into(),
                agents: vec![agent.clone()],
            },
            "demo-conversation",
        )?
        .value;
    println!("\nConversation {} with {agent}:\n", cv.id);
    let mut n = 5;
    let mut turns = 0_u32;
    let mut asked = QUESTIONS.iter().cycle();
    // Ask until a turn goes unanswered or the budget is spent: the turn that ended it, and why.
    let (transfer, b, unanswered) = loop {
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
        let compute = tier.limits().compute_cost_micro_usd(drive.fuel_consumed);
        let reply = lock()?
            .read_transcript(&operator, &Acting::Human, &cv.id, posted.seq, 1)?
            .into_iter()
            .next();
        if turns <= SHOWN_TURNS && reply.is_some() {
            println!("    operator: {question}");
            if let Some(r) = &reply {
                println!("    {agent}: {}", shortened(&r.body));
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
        if reply.is_none() || transfer.status != ahp_store::TransferStatus::Active || turns >= MAX_TURNS {
            let why = reply
                .is_none()
                .then(|| unanswered_because(question, drive.failure.as_ref()));
            break (transfer, b, why);
        }
    };
    let answered = turns - u32::from(unanswered.is_some());
    if answered > SHOWN_TURNS {
        step(
            n,
            "turns",
            &transfer,
            &format!(
                "{} more questions (the same again), each answered by a real turn and paid from the budget: spent {}/{}",
                answered - SHOWN_TURNS,
                b.spent_micro_usd,
                b.allocated_micro_usd
            ),
        );
        n += 1;
    }
    // The one line that says how the budget ran out, with the refusal that ended it.
    let left = b.allocated_micro_usd.saturating_sub(b.spent_micro_usd);
    let ending = match &unanswered {
        Some(why) => format!("budget spent: {why}"),
        None => "budget spent by the last turn's charges".to_owned(),
    };
    step(n, "out of budget", &transfer, &format!("{ending}; {left} µUSD left"));
    n += 1;
    if transfer.status != ahp_store::TransferStatus::Insolvent {
        // What is left cannot pay for a model call (a real provider's prices leave more than a
        // call's reservation unspent): the operator ends the agent rather than let it spin.
        anyhow::ensure!(
            transfer.status == ahp_store::TransferStatus::Active && unanswered.is_some(),
            "the agent answered {turns} questions without spending its budget; run with a smaller --budget"
        );
        let done = lock()?.terminate(&t, "its budget can no longer pay for a model call")?;
        step(
            n,
            "terminate",
            &done,
            "by the operator: what is left pays for no model call",
        );
        println!("\nModel calls of {t} (the newest 10):\n");
        print!("{}", table::model_calls(&lock()?.model_calls(&t, 10)?));
        return Ok(());
    }
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

    println!("\nModel calls of {t} (the newest 10):\n");
    print!("{}", table::model_calls(&store.model_calls(&t, 10)?));
    println!("\nEvent log of {t}:\n");
    print!("{}", table::events(&store.get_status(&t)?.events));
    Ok(())
}

/// Why the operator's `question` got no answer: how the turn ended (one line, no trace), or
/// that it ran none.
fn unanswered_because(question: &str, failure: Option<&ahp_host::agents::TurnFailure>) -> String {
    use ahp_host::sandbox::RunOutcome;
    let how = match failure.map(|f| &f.outcome) {
        None => "no turn ran".to_owned(),
        Some(RunOutcome::GuestError(m)) => {
            format!("the turn returned an error: {}", super::terminal::shown(&shortened(m)))
        }
        Some(RunOutcome::BudgetExhausted) => {
            "the host stopped the turn at the last fuel its budget paid for".to_owned()
        }
        Some(other) => other
            .failure_reason()
            .map_or_else(String::new, |r| super::terminal::shown(&shortened(&r)).into_owned()),
    };
    format!("{question:?} went unanswered: {how}")
}

/// `text` cut to one readable line of the demo's output.
fn shortened(text: &str) -> String {
    const SHOWN_CHARS: usize = 400;
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
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
