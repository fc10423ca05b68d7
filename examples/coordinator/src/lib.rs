//! Example agent: a coordinator that hands a human's question to its workers and answers with
//! what they found (see `examples/worker`).
//!
//! Its tool state names the workers, agents of the same owner, and how long to wait for them:
//! `{"workers": ["agt_…", …], "waitMode": "all" | "any"}` (at most 8 workers; `waitMode`
//! defaults to `all`).
//!
//! - A **question** (a human's message in a conversation with it): one task per worker, whose
//!   instructions are the question; one wait over those tasks (`all`, or `any`); the question
//!   is consumed and the turn ends. What it waits for — the wait, the conversation and the
//!   message to answer — is kept in its checkpoint, since the answer comes in a later turn,
//!   perhaps in a fresh sandbox after a host restart.
//! - A **fired wait**: one reply to the question, listing each task in the order of the workers:
//!   its assignee, its state and, once it has one, its result verbatim.
//!
//! Every turn does both: causes coalesce into one wake whose origin is only the first, so a turn
//! woken by a message also answers any wait of its checkpoint that has fired, and a turn woken
//! by a wait also reads its inbox. A turn the host runs again is harmless: the tasks, the wait
//! and the replies it makes take their identities from the wake and resolve to what the first
//! run made, and a question already in the checkpoint is consumed without being asked twice.
//! Messages from agents are consumed unanswered.

use std::collections::VecDeque;

use ahp_guest::conversations::{self, Author};
use ahp_guest::delegation::{self, NewTask, TaskState, WaitMode, WaitState};
use ahp_guest::{Agent, checkpoint, snapshot};

/// The most workers one question fans out to: a wait is over at most this many tasks.
const MAX_WORKERS: usize = delegation::MAX_SOURCES;

/// The most questions in flight at once: a turn answers every fired one (one reply each, within
/// a turn's 64) and takes no new question while this many wait.
const MAX_IN_FLIGHT: usize = conversations::MAX_REPLIES / 2;

/// How many answered questions the checkpoint remembers, so that a delivery a crash left
/// queued after its question was asked is recognised and not asked again.
const REMEMBERED: usize = 256;

/// What the tool state says.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    workers: Vec<String>,
    wait_mode: Mode,
}

/// `waitMode` in the tool state.
#[derive(Debug, Default, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    All,
    Any,
}

impl From<Mode> for WaitMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::All => Self::All,
            Mode::Any => Self::Any,
        }
    }
}

/// The checkpoint: the questions being worked on, and those answered lately.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Memory {
    pending: Vec<Question>,
    answered: VecDeque<String>,
}

impl Memory {
    /// Whether message `id` was already asked (answered or not).
    fn knows(&self, id: &str) -> bool {
        self.pending.iter().any(|q| q.message_id == id) || self.answered.iter().any(|m| m == id)
    }
}

/// A question handed to the workers.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Question {
    /// The wait over its tasks (`wait_…`).
    wait_id: String,
    /// Where it was asked (`cv_…`).
    conversation_id: String,
    /// The message to answer (`msg_…`).
    message_id: String,
    /// The question, for the answer's first line.
    text: String,
}

struct Coordinator;

impl Agent for Coordinator {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        // Fail the activation early on a tool state it cannot follow.
        config()?;
        Ok(())
    }

    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let config = config()?;
        let mut memory: Memory = checkpoint::load()?.unwrap_or_default();
        let replied = answer_fired(&mut memory)?;
        ask(&config, &mut memory, conversations::MAX_REPLIES - replied)?;
        checkpoint::save(&memory)?;
        Ok(())
    }
}

/// Answers every question whose wait has fired (or was cancelled by the owner); returns how
/// many replies it made.
fn answer_fired(memory: &mut Memory) -> Result<usize, Box<dyn std::error::Error>> {
    let mut still = Vec::new();
    let mut replied = 0;
    for question in std::mem::take(&mut memory.pending) {
        let wait = delegation::read_wait(&question.wait_id)?;
        if wait.state == WaitState::Waiting {
            still.push(question);
            continue;
        }
        let mut body = format!("On \"{}\":", question.text);
        for source in &wait.sources {
            let task = delegation::get_task(&source.task_id)?;
            let state = state_name(task.state);
            match &task.result {
                Some(result) => body.push_str(&format!("\n- {} ({state}): {result}", task.assignee)),
                None => body.push_str(&format!("\n- {} ({state})", task.assignee)),
            }
        }
        let body = truncate(body, 64 * 1024);
        conversations::reply_to(&question.conversation_id, &question.message_id, &body)?;
        replied += 1;
        memory.answered.push_back(question.message_id);
        if memory.answered.len() > REMEMBERED {
            memory.answered.pop_front();
        }
    }
    memory.pending = still;
    Ok(replied)
}

/// Hands each queued human question to the workers, as many as one turn's writes, its
/// `replies_left` and [`MAX_IN_FLIGHT`] allow; the rest stay queued for the turn a wait wakes.
fn ask(config: &Config, memory: &mut Memory, mut replies_left: usize) -> Result<(), Box<dyn std::error::Error>> {
    let writes_per_question = config.workers.len() + 1;
    let mut questions = delegation::MAX_WRITES as usize / writes_per_question;
    for delivery in conversations::inbox().take(conversations::MAX_REPLIES) {
        let delivery = delivery?;
        let message = delivery.message();
        if !matches!(message.author, Author::Human) || memory.knows(&message.id) {
            delivery.consume()?;
            continue;
        }
        if config.workers.is_empty() {
            if replies_left == 0 {
                break;
            }
            replies_left -= 1;
            delivery.reply("I have no workers to ask (toolState.workers is empty).")?;
            delivery.consume()?;
            continue;
        }
        if questions == 0 || memory.pending.len() >= MAX_IN_FLIGHT {
            // This turn's writes, or the questions in flight, are spent: the rest stay queued
            // for the turn the next fired wait makes.
            break;
        }
        questions -= 1;
        let mut tasks = Vec::with_capacity(config.workers.len());
        for (i, worker) in config.workers.iter().enumerate() {
            let title = format!("part {} of {} of {}", i + 1, config.workers.len(), message.id);
            let task = delegation::create_task(&NewTask::new(worker, &title, &message.body))?;
            tasks.push(task.id);
        }
        let wait = delegation::register_wait(&tasks, config.wait_mode.into())?;
        memory.pending.push(Question {
            wait_id: wait.id,
            conversation_id: message.conversation_id.clone(),
            message_id: message.id.clone(),
            text: truncate(message.body.clone(), 256),
        });
        // Remember the question before consuming it: a crash in between leaves it queued and
        // known, never asked twice.
        checkpoint::save(memory)?;
        delivery.consume()?;
    }
    Ok(())
}

fn state_name(s: TaskState) -> &'static str {
    match s {
        TaskState::Open => "open",
        TaskState::Running => "running",
        TaskState::Succeeded => "succeeded",
        TaskState::Failed => "failed",
        TaskState::Cancelled => "cancelled",
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The tool state as a [`Config`], at most [`MAX_WORKERS`] distinct workers.
fn config() -> Result<Config, Box<dyn std::error::Error>> {
    let config: Config = snapshot::tool_state_as().map_err(|e| format!("tool state: {e}"))?;
    if config.workers.len() > MAX_WORKERS {
        return Err(format!("tool state: {} workers, at most {MAX_WORKERS}", config.workers.len()).into());
    }
    let mut seen = config.workers.clone();
    seen.sort();
    seen.dedup();
    if seen.len() != config.workers.len() {
        return Err("tool state: a worker is listed twice".into());
    }
    Ok(config)
}

ahp_guest::export_agent!(Coordinator);
