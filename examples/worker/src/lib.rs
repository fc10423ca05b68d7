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
//! The tool state configures it: `{"job": "count" | "reverse", "delayMs": <n>}`. `delayMs`
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

/// The longest `delayMs` honoured: past the largest tier's 90 s wall clock per turn.
const MAX_DELAY_MS: u64 = 120_000;

/// What the tool state says.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    job: Job,
    delay_ms: u64,
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
        truncate(out, delegation::MAX_TEXT_BYTES)
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
                delivery.reply(&config.job.run(&delivery.message().body))?;
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
            let active = task.current_attempt.as_ref().filter(|a| a.state == AttemptState::Active);
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
            let result = config.job.run(&task.instructions);
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
    }
}
