//! Every limit of the delegation domain, with why it has its value. Each is tested at the limit
//! and one past it (`tests/limits.rs`).

pub use crate::conversation::bounds::{MAX_PAGE_LIMIT, MAX_TITLE_BYTES};

/// Longest task instructions: the brief a worker reads, not a document store (64 KiB, a
/// message body's bound).
pub const MAX_TASK_INSTRUCTIONS_BYTES: usize = 64 * 1024;
/// Longest task result text (64 KiB, as instructions).
pub const MAX_TASK_RESULT_BYTES: usize = 64 * 1024;
/// Most open or running tasks assigned to one agent: a coordinator fanning out to its workers
/// needs a handful each; a runaway loop creating tasks is stopped long before the store grows.
pub const MAX_OPEN_TASKS_PER_AGENT: u64 = 64;
/// Most attempts one task may have (revoked attempts included): a task whose assignee keeps
/// losing its endpoint before the fence is not restarted forever.
pub const MAX_ATTEMPTS_PER_TASK: u64 = 16;
/// Most sources of one wait (the seed's 1..8).
pub const MAX_WAIT_SOURCES: usize = 8;
/// Most waits one agent may hold in `waiting`: each is a future wake.
pub const MAX_WAITING_WAITS_PER_AGENT: u64 = 32;
/// Longest completion intent of a goal (fixed at creation).
pub const MAX_COMPLETION_INTENT_BYTES: usize = 4096;
/// Most plan steps of a goal: a plan, not a task list (the tasks are the work).
pub const MAX_PLAN_STEPS: usize = 32;
/// Longest plan step title.
pub const MAX_PLAN_STEP_BYTES: usize = 200;
/// Longest checkpoint note.
pub const MAX_CHECKPOINT_NOTE_BYTES: usize = 4096;
/// Most active goals per owner principal.
pub const MAX_ACTIVE_GOALS_PER_PRINCIPAL: u64 = 256;
