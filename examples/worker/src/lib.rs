//! Example agent: a worker other agents of its owner hand tasks to (see `examples/coordinator`).
//!
//! Each turn it does every task assigned to it whose attempt is active — the one its
//! `agent-task-attempt` wake names first, then any other that coalesced into the same wake — by
//! running its job on the task's instructions, and hands the result in with
//! `complete-attempt`. The job is deterministic, so a test can check a result byte for byte:
//!
//! - `count` (the default): `count: <n> words, <m> letters` (letters are alphabetic characters);
//! - `reverse`: `reverse: ` and the instruction's words in reverse order, one space apart.
//!
//! A human who messages the worker directly gets the job's result on the message as a reply;
//! messages from agents are consumed unanswered (two agents never answer each other forever).
//!
//! With `rounds` > 0 the result ends with a proof of work the checker can redo:
//! `; digest <16 hex digits>`, the FNV-1a-64 hash of the instructions followed by `rounds`
//! rounds of SplitMix64 (about ten instructions of fuel each), which makes the job cost CPU,
//! charged to the worker's own budget.
//!
//! The tool state configures it: `{"job": "count" | "reverse", "rounds": <n>, "delayMs": <n>}`. `delayMs`
//! (default 0, at most 120,000) makes it take that long over each task before it hands the
//! result in, waiting in a host call: a slow worker for the `any` wait, and a window for the
//! host's crash tests. Waiting counts against the tier's wall clock per turn.
//!
//! A turn the host runs again changes nothing: an attempt no longer active (finished, its task
//! cancelled, or its delivery unknown after a crash) is skipped, finishing an attempt again with
//! the same result is a no-op, and replies resolve to the messages already posted.

use std::time::Duration;

use ahp_guest::conversations::{self, Author};
use ahp_guest::delegation::{self, AttemptState, Error, Outcome, TaskRole, TaskState};
use ahp_guest::{Agent, snapshot};

/// The most `rounds` honoured: about 10¹⁰ fuel, past every tier's fuel per turn.
const MAX_ROUNDS: u64 = 1_000_000_000;

/// The longest `delayMs` honoured: past the largest tier's 90 s wall clock per turn.
const MAX_DELAY_MS: u64 = 120_000;

/// What the tool state says.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    job: Job,
    rounds: u64,
    delay_ms: u64,
}

impl Config {
    /// The result of the job on `text`, with its digest when `rounds` asks for one.
    fn result(&self, text: &str) -> String {
        let mut out = self.job.run(text);
        if self.rounds > 0 {
            out.push_str(&format!("; digest {:016x}", digest(text, self.rounds)));
        }
        truncate(out, delegation::MAX_TEXT_BYTES)
    }
}

/// FNV-1a-64 of `text`, then `rounds` rounds of SplitMix64.
fn digest(text: &str, rounds: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    for _ in 0..rounds {
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h = z ^ (z >> 31);
    }
    h
}

/// The deterministic job a worker does on a text.
#[derive(Debug, Default, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Job {
    /// Counts its words and letters.
    #[default]
    Count,
    /// Reverses the order of its words.
    Reverse,
}

impl Job {
    /// The job's result on `text`, at most a result's 64 KiB.
    fn run(self, text: &str) -> String {
        let out = match self {
            Self::Count => {
                let words = text.split_whitespace().count();
                let letters = text.chars().filter(|c| c.is_alphabetic()).count();
                format!("count: {words} words, {letters} letters")
            }
            Self::Reverse => {
                let words: Vec<&str> = text.split_whitespace().rev().collect();
                format!("reverse: {}", words.join(" "))
            }
        };
        // Room for the digest: the result stays within its bound.
        truncate(out, delegation::MAX_TEXT_BYTES - 32)
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

struct Worker;

impl Agent for Worker {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        // Fail the activation early on a tool state it cannot follow.
        config()?;
        Ok(())
    }

    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let config = config()?;
        for delivery in conversations::inbox().take(conversations::MAX_REPLIES) {
            let delivery = delivery?;
            if matches!(delivery.message().author, Author::Human) {
                delivery.reply(&config.result(&delivery.message().body))?;
            }
            delivery.consume()?;
        }

        // The task the wake names, then every other assigned task with an active attempt
        // (causes coalesce: a wake's origin names only the first).
        let mut work = Vec::new();
        if let Some(assigned) = delegation::assigned_task()? {
            work.push(assigned);
        }
        for task in delegation::tasks(TaskRole::Assigned, Some(TaskState::Running)) {
            let task = task?;
            let active = task
                .current_attempt
                .as_ref()
                .filter(|a| a.state == AttemptState::Active);
            if let Some(attempt) = active.map(|a| a.id.clone())
                && !work.iter().any(|(_, a)| *a == attempt)
            {
                work.push((task, attempt));
            }
        }
        // Each hand-in is one write; the rest wait for a later turn.
        for (task, attempt) in work.into_iter().take(delegation::MAX_WRITES as usize) {
            if config.delay_ms > 0 {
                std::thread::sleep(Duration::from_millis(config.delay_ms));
            }
            let result = config.result(&task.instructions);
            match delegation::complete_attempt(&attempt, Outcome::Succeeded, &result) {
                // Cancelled while it worked: nothing to hand in.
                Ok(_) | Err(Error::Refused(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// The tool state as a [`Config`] (absent fields are their defaults).
fn config() -> Result<Config, Box<dyn std::error::Error>> {
    let config: Config = snapshot::tool_state_as().map_err(|e| format!("tool state: {e}"))?;
    if config.rounds > MAX_ROUNDS {
        return Err(format!("tool state: rounds {} is over {MAX_ROUNDS}", config.rounds).into());
    }
    if config.delay_ms > MAX_DELAY_MS {
        return Err(format!("tool state: delayMs {} is over {MAX_DELAY_MS}", config.delay_ms).into());
    }
    Ok(config)
}

ahp_guest::export_agent!(Worker);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jobs_are_checkable_by_hand() {
        let text = "How many legs  does a spider have?";
        assert_eq!(Job::Count.run(text), "count: 7 words, 26 letters");
        assert_eq!(Job::Reverse.run(text), "reverse: have? spider a does legs many How");
        assert_eq!(Job::Count.run(""), "count: 0 words, 0 letters");
    }

    #[test]
    fn a_result_never_passes_the_bound() {
        let text = "é ".repeat(40 * 1024);
        let out = Job::Reverse.run(&text);
        assert!(out.len() <= delegation::MAX_TEXT_BYTES, "{}", out.len());
        assert!(out.starts_with("reverse: é é"));
        let config = Config {
            job: Job::Reverse,
            rounds: 1,
            delay_ms: 0,
        };
        assert!(config.result(&text).len() <= delegation::MAX_TEXT_BYTES);
    }

    #[test]
    fn the_digest_is_fnv_then_splitmix() {
        // FNV-1a-64 of "a" is 0xaf63dc4c8601ec8c; zero rounds leave it.
        assert_eq!(digest("a", 0), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(digest("a", 1), digest("a", 0));
        let config = Config {
            job: Job::Count,
            rounds: 0,
            delay_ms: 0,
        };
        assert_eq!(config.result("a b"), "count: 2 words, 2 letters");
    }
}
