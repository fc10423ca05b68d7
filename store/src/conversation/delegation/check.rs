//! An independent SQL check of the delegation domain's one-shot invariants.
//!
//! It opens the database file read-only with its own connection and asks plain SQL questions,
//! sharing no code with the store's write paths — so a crash test (kill -9 of a real server)
//! can assert afterwards that recovery did not duplicate anything:
//!
//! - no wait fired twice (at most one Wait-origin wake cause per wait), and a triggered wait
//!   has exactly one, a never-triggered one none;
//! - an `all` wait fired only with every source matched;
//! - no attention event is duplicated (one terminal attention per terminal attempt and goal,
//!   one stalled attention per goal and epoch of meaningful work), and each one with a target
//!   has exactly one wake cause;
//! - no attention was recorded for a task while a Goal-scoped wait over it routed its facts
//!   (registered before the event and not cancelled before it);
//! - at most one active attempt per task;
//! - no MCP task ended twice (`mcp_tasks.ends`), every ended one exactly once, and an
//!   `ask_agent` task answered only by a later agent message of its conversation.

use std::path::Path;

use ahp_store_sql::Tx;
use rusqlite::OpenFlags;

use crate::sqlite::SqliteConnection;
use serde::Serialize;

use crate::conversation::ConversationResult as Result;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// Which rule (a stable name, e.g. `wait_fired_twice`).
    pub rule: &'static str,
    /// The offending wait, event or task id.
    pub subject: String,
}

const RULES: &[(&str, &str)] = &[
    (
        "wait_fired_twice",
        "SELECT subject_id FROM wake_causes WHERE origin = 'wait' GROUP BY subject_id HAVING count(*) > 1",
    ),
    (
        "triggered_wait_without_one_wake",
        "SELECT w.id FROM agent_waits w WHERE w.triggered_at IS NOT NULL
           AND (SELECT count(*) FROM wake_causes c WHERE c.origin = 'wait' AND c.subject_id = w.id) <> 1",
    ),
    (
        "untriggered_wait_with_wake",
        "SELECT w.id FROM agent_waits w WHERE w.triggered_at IS NULL
           AND EXISTS (SELECT 1 FROM wake_causes c WHERE c.origin = 'wait' AND c.subject_id = w.id)",
    ),
    (
        "all_wait_fired_early",
        "SELECT w.id FROM agent_waits w WHERE w.mode = 'all' AND w.triggered_at IS NOT NULL
           AND (SELECT count(*) FROM agent_wait_sources s WHERE s.wait_id = w.id
                  AND s.matched_at IS NOT NULL AND s.matched_at <= w.triggered_at) < w.source_count",
    ),
    (
        "attention_duplicated",
        "SELECT attempt_id || '/' || goal_id FROM attention_events WHERE kind = 'agent_task_terminal'
         GROUP BY attempt_id, goal_id HAVING count(*) > 1",
    ),
    (
        "stall_duplicated",
        "SELECT goal_id FROM attention_events WHERE kind = 'goal_workflow_stalled'
         GROUP BY goal_id, epoch HAVING count(*) > 1",
    ),
    (
        "attention_without_one_wake",
        "SELECT e.id FROM attention_events e WHERE e.target_agent_id IS NOT NULL
           AND (SELECT count(*) FROM wake_causes c WHERE c.origin = 'attention_event' AND c.subject_id = e.id) <> 1",
    ),
    (
        "attention_not_suppressed",
        "SELECT e.id FROM attention_events e JOIN agent_wait_sources s ON s.task_id = e.task_id
           JOIN agent_waits w ON w.id = s.wait_id AND w.goal_id = e.goal_id
         WHERE w.created_at <= e.created_at AND (w.cancelled_at IS NULL OR w.cancelled_at > e.created_at)",
    ),
    (
        "two_active_attempts",
        "SELECT task_id FROM agent_task_attempts WHERE state = 'active' GROUP BY task_id HAVING count(*) > 1",
    ),
    ("mcp_task_ended_twice", "SELECT id FROM mcp_tasks WHERE ends > 1"),
    (
        "mcp_task_end_uncounted",
        "SELECT id FROM mcp_tasks WHERE (status IN ('working', 'input_required') AND ends <> 0)
                            OR (status NOT IN ('working', 'input_required') AND ends <> 1)",
    ),
    (
        "mcp_task_answered_by_an_earlier_message",
        "SELECT t.id FROM mcp_tasks t JOIN messages m ON m.id = t.answer_id
         WHERE t.awaits_kind = 'reply' AND (m.seq <= t.asked_seq OR m.conversation_id <> t.conversation_id
                                            OR m.author_kind <> 'agent')",
    ),
];

/// Checks the database at `path` (read-only) and returns every violation found (none: the
/// invariants hold).
///
/// # Errors
///
/// Only if the file cannot be opened or read as an ahp database.
pub fn check_delegation_invariants(path: impl AsRef<Path>) -> Result<Vec<Violation>> {
    let conn =
        rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(crate::sqlite::classify)?;
    let mut conn = SqliteConnection::new(conn);
    violations(&Tx::new(&mut conn))
}

pub(crate) fn violations(conn: &Tx<'_>) -> Result<Vec<Violation>> {
    let mut out = Vec::new();
    for (rule, sql) in RULES {
        let mut stmt = conn.prepare(sql)?;
        for subject in stmt.query_map([], |r| r.get::<_, String>(0))? {
            out.push(Violation {
                rule,
                subject: subject?,
            });
        }
    }
    Ok(out)
}
