//! `ahp run COMPONENT --snapshot FILE`: one agent, locally, with no server — how an author
//! tries a component.
//!
//! The same path as a transfer through `ahp serve`, in-process (as `ahp demo` drives one): the
//! component is registered, the snapshot staged, a runtime provisioned at `--tier` with
//! `--budget`, pushed and activated (the guest's `resume`, in the sandbox, under the tier's
//! ceilings and the meter), then one turn per `--message`: the operator posts the message in a
//! conversation with the agent and the continuation controller runs the turn. Without
//! `--message`, messages come from a prompt when stdin is a terminal, else one per line of
//! stdin. Each turn prints the agent's replies, what the guest printed, its fuel (against the
//! tier's per-turn ceiling), its wall-clock time and its spend; a turn that did not return
//! `ok` prints the reason, the wasm backtrace and the last lines of the guest's output, every
//! guest-controlled text with its control characters escaped (`terminal::shown`). On exit the
//! model calls and the event log are printed. The data directory is throwaway unless
//! `--data-dir` names one; `--policy FILE` is the operator's policy (models, MCP servers,
//! egress), its credentials read from the data directory's vault.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use ahp_host::agents::TurnFailure;
use ahp_host::policy::{POLICY_FILE, Policy};
use ahp_host::sandbox::{Diagnosis, RunOutcome};
use ahp_host::shared_store::StoreLock;
use ahp_store::conversation::{Acting, Author, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT};
use ahp_store::{DEFAULT_TOKEN_TTL, MAX_BUDGET_MICRO_USD, SnapshotInput, Tier, TokenScope, issue_transfer_token};
use anyhow::Context;
use clap::Args;

use super::{DataDir, table, terminal};

/// Largest snapshot or policy file `ahp run` reads, in bytes.
pub(crate) const MAX_INPUT_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Most messages (turns) one `ahp run` takes.
pub(crate) const MAX_MESSAGES: usize = 1_000;

/// Most replies of one turn that are printed (a turn replies at most 64 times).
const MAX_SHOWN_REPLIES: usize = 64;

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The component (.wasm, built for wasm32-wasip2).
    component: PathBuf,
    /// The snapshot the agent continues: the JSON `snapshot_state` takes (`sourceHost`,
    /// `systemPrompt`, `messageHistory`, `toolState`, `mcpConfig`).
    #[arg(long, value_name = "FILE")]
    snapshot: PathBuf,
    /// The tier whose ceilings the sandbox runs under: nano, small or large.
    #[arg(long, default_value = "small")]
    tier: Tier,
    /// The budget, in micro-USD (compute, model and tool calls are paid from it).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=MAX_BUDGET_MICRO_USD))]
    budget: u64,
    /// A message to the agent; one turn each, in order (repeat the flag). Without it: a prompt
    /// when stdin is a terminal, else one message per line of stdin.
    #[arg(long = "message", value_name = "TEXT")]
    messages: Vec<String>,
    /// The operator's policy (the JSON of `policy.json`: models, MCP servers, egress); its
    /// credential references are read from the data directory's vault.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
}

/// Reads `path`, refusing a file larger than [`MAX_INPUT_FILE_BYTES`].
fn read_bounded(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("reading the {what} {}", path.display()))?
        .len();
    anyhow::ensure!(
        len <= MAX_INPUT_FILE_BYTES,
        "the {what} {} is {len} bytes; at most {MAX_INPUT_FILE_BYTES} are read",
        path.display()
    );
    std::fs::read(path).with_context(|| format!("reading the {what} {}", path.display()))
}

/// Where the turns' messages come from.
enum Messages {
    Given(std::vec::IntoIter<String>),
    Prompt,
    Lines(std::io::Lines<std::io::StdinLock<'static>>),
}

impl Messages {
    fn next(&mut self) -> anyhow::Result<Option<String>> {
        match self {
            Self::Given(m) => Ok(m.next()),
            Self::Prompt => loop {
                print!("you> ");
                std::io::stdout().flush()?;
                let mut line = String::new();
                if std::io::stdin().read_line(&mut line)? == 0 {
                    println!();
                    return Ok(None);
                }
                let line = line.trim_end_matches(['\n', '\r']);
                if !line.trim().is_empty() {
                    return Ok(Some(line.to_owned()));
                }
            },
            Self::Lines(lines) => loop {
                match lines.next().transpose()? {
                    None => return Ok(None),
                    Some(l) if l.trim().is_empty() => {}
                    Some(l) => return Ok(Some(l)),
                }
            },
        }
    }
}

pub(crate) fn run(data_dir: Option<PathBuf>, args: RunArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.messages.len() <= MAX_MESSAGES,
        "at most {MAX_MESSAGES} --message flags (one turn each)"
    );
    let snapshot: SnapshotInput = serde_json::from_slice(&read_bounded(&args.snapshot, "snapshot")?)
        .with_context(|| format!("{} is not a snapshot", args.snapshot.display()))?;
    let policy = match &args.policy {
        Some(path) => {
            let policy: Policy = serde_json::from_slice(&read_bounded(path, "policy")?)
                .with_context(|| format!("{} is not a policy", path.display()))?;
            policy
                .validate()
                .with_context(|| format!("the policy {}", path.display()))?;
            Some(policy)
        }
        None => None,
    };
    let temp = match data_dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().context("creating a temporary data directory")?),
    };
    let dir = DataDir::at(data_dir.unwrap_or_else(|| temp.as_ref().expect("set above").path().to_path_buf()))?;
    if let Some(policy) = &policy {
        // A rerun on the same data directory passes the same policy again; a changed one
        // replaces the directory's (this is the author's own directory, not a server's).
        let held = dir.path().join(POLICY_FILE);
        if held.exists() && Policy::load(dir.path())? != *policy {
            println!(
                "replacing the policy in {} with {}",
                dir.path().display(),
                args.policy.as_ref().expect("set").display()
            );
        }
        policy.save(dir.path())?;
    }
    let host = dir.open_host()?;
    let (shared, sandboxes) = (host.store().clone(), host.sandboxes().clone());
    let key = dir.token_key()?;
    let lock = || shared.locked();

    let component = register(&sandboxes, &args.component)?;
    let limits = args.tier.limits();
    println!(
        "ahp run — {} ({} bytes, {}), data directory {}{}",
        args.component.display(),
        component.size_bytes,
        component.digest,
        dir.path().display(),
        if temp.is_some() { " (throwaway)" } else { "" }
    );
    println!(
        "tier {}: {} fuel and {} ms per turn, {} MiB memory, {} egress bytes; budget {} µUSD; {}",
        args.tier,
        limits.fuel_per_turn,
        limits.wall_clock_per_turn.as_millis(),
        limits.memory_bytes / (1024 * 1024),
        limits.egress_bytes,
        args.budget,
        match sandboxes.policy().models.len() {
            0 => "no model offered (no policy names one)".to_owned(),
            n => format!("{n} model(s) offered by the policy"),
        }
    );

    let t = {
        let mut store = lock();
        let staged = store.snapshot_state(&snapshot)?;
        let t = staged.id.clone();
        let tok = issue_transfer_token(&key, &t, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL)?;
        store.provision_runtime(&t, args.tier, args.budget, &component.digest, &tok)?;
        store.push_state(&t, Some(&staged.checksum))?;
        t
    };
    let tok = issue_transfer_token(&key, &t, TokenScope::Activate, lock().now(), DEFAULT_TOKEN_TTL)?;
    let started = Instant::now();
    let report = host.activate(&t, &tok)?;
    let elapsed = started.elapsed();
    if let Some(reason) = report.outcome.failure_reason() {
        let reason = terminal::shown(&reason).into_owned();
        println!("\nactivation failed: {reason}");
        show_diagnosis(report.diagnosis.as_ref());
        print_logs(&shared, &t)?;
        anyhow::bail!("the agent did not resume: {reason}");
    }
    let mut shown_log = 0;
    print_new_output(&sandboxes.guest_log(&t).unwrap_or_default(), &mut shown_log);
    let agent = report.transfer.agent_id.clone().context("activation bound no agent")?;
    println!(
        "activated {t} as agent {agent}: resume took {} fuel ({}), {} ms",
        report.fuel_consumed,
        share(report.fuel_consumed, limits.fuel_per_turn),
        elapsed.as_millis()
    );
    if !sandboxes.takes_turns(&report.transfer)? {
        println!("the component takes no turns (built for ahp:agent@0.1.0): nothing to send it");
        return print_logs(&shared, &t);
    }

    let operator = Caller::full(OPERATOR_SUBJECT)?;
    let cv = lock()
        .create_conversation(
            &operator,
            &NewConversation {
                title: "ahp run".into(),
                agents: vec![agent.clone()],
            },
            // Unique per run: a rerun on the same data directory opens its own conversation.
            &format!("ahp-run-{t}"),
        )?
        .value;
    let mut messages = if !args.messages.is_empty() {
        Messages::Given(args.messages.into_iter())
    } else if std::io::stdin().is_terminal() {
        println!("Type a message and press Enter (end with Ctrl-D).");
        Messages::Prompt
    } else {
        Messages::Lines(std::io::stdin().lock().lines())
    };
    let (mut turns, mut failed) = (0_usize, 0_usize);
    while let Some(text) = messages.next()? {
        anyhow::ensure!(turns < MAX_MESSAGES, "at most {MAX_MESSAGES} messages (one turn each)");
        let status = lock().transfer(&t)?.status;
        if status != ahp_store::TransferStatus::Active {
            println!("\nthe transfer is {status}: no more turns");
            break;
        }
        turns += 1;
        let before = lock().budget(&t)?.map_or(0, |b| b.spent_micro_usd);
        let posted = lock()
            .post_message(
                &operator,
                &NewMessage {
                    conversation: cv.id.clone(),
                    acting: Acting::Human,
                    body: text.clone(),
                    reply_to: None,
                    idempotency: IdempotencyKey::Key(format!("ahp-run-{t}-{turns}")),
                },
            )?
            .value;
        let started = Instant::now();
        let drive = host.agents().drive(&agent)?;
        let elapsed = started.elapsed();
        println!("\n[turn {turns}] you: {text}");
        let replies = lock().read_transcript(&operator, &Acting::Human, &cv.id, posted.seq, MAX_SHOWN_REPLIES)?;
        for r in replies.iter().filter(|m| matches!(&m.author, Author::Agent { .. })) {
            println!("[turn {turns}] {agent}: {}", r.body);
        }
        print_new_output(&sandboxes.guest_log(&t).unwrap_or_default(), &mut shown_log);
        let budget = lock().budget(&t)?.context("the transfer has a budget")?;
        println!(
            "[turn {turns}] {} fuel ({}), {} ms of {} ms, spent {} µUSD; budget {}/{} µUSD",
            drive.fuel_consumed,
            share(drive.fuel_consumed, limits.fuel_per_turn),
            elapsed.as_millis(),
            limits.wall_clock_per_turn.as_millis(),
            budget.spent_micro_usd.saturating_sub(before),
            budget.spent_micro_usd,
            budget.allocated_micro_usd
        );
        match &drive.failure {
            Some(failure) => {
                failed += 1;
                show_failure(turns, failure);
                // A sandbox that trapped is gone, and with it the output it had printed.
                shown_log = 0;
            }
            None if drive.consumed == 0 => {
                failed += 1;
                println!("[turn {turns}] the turn ran no wake (see the event log)");
            }
            None => {}
        }
    }
    print_logs(&shared, &t)?;
    anyhow::ensure!(failed == 0, "{failed} of {turns} turns failed");
    Ok(())
}

/// How long a registration may take before `ahp run` says it is compiling.
const COMPILE_NOTICE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Registers the component at `path`: compiled once for this machine and kept in the data
/// directory's cache (a rerun on the same `--data-dir` loads it). A compile that takes longer
/// than [`COMPILE_NOTICE_AFTER`] (a Python component takes ~30 s) says so while it runs.
fn register(sandboxes: &ahp_host::sandbox::Sandboxes, path: &Path) -> anyhow::Result<ahp_store::ComponentRecord> {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            if finished.recv_timeout(COMPILE_NOTICE_AFTER) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                let size = std::fs::metadata(path).map_or(0, |m| m.len());
                println!(
                    "compiling {} ({:.1} MB) for this machine; a rerun with the same --data-dir reuses it…",
                    path.display(),
                    size as f64 / 1e6
                );
            }
        });
        let registered = sandboxes
            .register_component_file(path, None)
            .with_context(|| format!("registering {}", path.display()));
        drop(done);
        registered
    })
}

/// `used` as a share of `ceiling`, e.g. `3.2% of the turn's ceiling`.
fn share(used: u64, ceiling: u64) -> String {
    format!(
        "{:.1}% of the turn's ceiling",
        used as f64 * 100.0 / ceiling.max(1) as f64
    )
}

/// Prints what the guest wrote since `shown` bytes of its log.
fn print_new_output(log: &str, shown: &mut usize) {
    let new = log.get(*shown..).unwrap_or(log);
    for line in new.lines() {
        println!("  | {}", terminal::shown(line));
    }
    *shown = log.len();
}

fn show_failure(turn: usize, failure: &TurnFailure) {
    let reason = failure.outcome.failure_reason().unwrap_or_default();
    let reason = match &failure.outcome {
        RunOutcome::GuestError(m) => format!("the turn returned an error: {m}"),
        _ => reason,
    };
    println!("[turn {turn}] FAILED: {}", terminal::shown(&reason));
    show_diagnosis(failure.diagnosis.as_ref());
}

fn show_diagnosis(diagnosis: Option<&Diagnosis>) {
    let Some(d) = diagnosis else { return };
    if let Some(trace) = &d.trace {
        println!("  wasm trace:");
        for line in trace.lines() {
            println!("    {}", terminal::shown(line));
        }
    }
    if !d.guest_log_tail.is_empty() {
        println!("  the guest's last output:");
        for line in d.guest_log_tail.lines() {
            println!("  | {}", terminal::shown(line));
        }
    }
}

/// The transfer's model calls (if any) and its event log.
fn print_logs(shared: &ahp_host::shared_store::SharedStore, t: &str) -> anyhow::Result<()> {
    let mut store = shared.locked();
    let calls = store.model_calls(t, 20)?;
    if !calls.is_empty() {
        println!("\nModel calls of {t} (the newest 20):\n");
        print!("{}", table::model_calls(&calls));
    }
    println!("\nEvent log of {t}:\n");
    print!("{}", table::events(&store.get_status(t)?.events));
    Ok(())
}
