//! The operator's reads of the delegation domain: every task and goal, across all principals
//! (the CLI's `ahp task list|show` and `ahp goal list|show`).
//!
//! The operator (whoever holds the data directory) is trusted, so these take no
//! [`Caller`](crate::conversation::Caller) and are never reachable from a tool. They still never
//! show a principal digest or an idempotency key.

use super::goal::{self, GOAL_COLUMNS, Goal};
use super::task::{self, AgentTask, TASK_COLUMNS, TaskRow};
use crate::conversation::ConversationResult as Result;
use crate::conversation::bounds;
use crate::db::Store;

impl Store {
    /// Every task ordered by id after the exclusive cursor `after`, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`ConversationError::InvalidInput`](crate::conversation::ConversationError::InvalidInput)
    /// for a bad limit or cursor; a corrupt row fails closed.
    pub fn operator_tasks(&self, after: Option<&str>, limit: usize) -> Result<Vec<AgentTask>> {
        bounds::page_limit(limit)?;
        if let Some(t) = after {
            task::check_id(t)?;
        }
        let sql = format!("SELECT {TASK_COLUMNS} FROM agent_tasks WHERE id > ?1 ORDER BY id LIMIT ?2");
        let rows: Vec<TaskRow> = self
            .conn
            .prepare_cached(&sql)?
            .query_map((after.unwrap_or(""), limit as i64), |r| Ok(task::from_row(r)))?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .collect::<Result<_>>()?;
        rows.into_iter().map(|row| task::full(&self.conn, row)).collect()
    }

    /// The task `task`, with its newest attempt.
    ///
    /// # Errors
    ///
    /// [`ConversationError::TaskNotFound`](crate::conversation::ConversationError::TaskNotFound).
    pub fn operator_task(&self, task: &str) -> Result<AgentTask> {
        task::check_id(task)?;
        task::full(&self.conn, task::load(&self.conn, task)?)
    }

    /// Every goal ordered by id after the exclusive cursor `after`, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`ConversationError::InvalidInput`](crate::conversation::ConversationError::InvalidInput)
    /// for a bad limit or cursor; a corrupt row fails closed.
    pub fn operator_goals(&self, after: Option<&str>, limit: usize) -> Result<Vec<Goal>> {
        bounds::page_limit(limit)?;
        if let Some(g) = after {
            goal::check_id(g)?;
        }
        let sql = format!("SELECT {GOAL_COLUMNS} FROM goals WHERE id > ?1 ORDER BY id LIMIT ?2");
        self.conn
            .prepare_cached(&sql)?
            .query_map((after.unwrap_or(""), limit as i64), |r| Ok(goal::from_row(r)))?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .collect()
    }

    /// The goal `goal`.
    ///
    /// # Errors
    ///
    /// [`ConversationError::GoalNotFound`](crate::conversation::ConversationError::GoalNotFound).
    pub fn operator_goal(&self, goal: &str) -> Result<Goal> {
        goal::check_id(goal)?;
        goal::load(&self.conn, goal)
    }
}
