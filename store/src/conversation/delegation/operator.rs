//! The operator's reads of the delegation domain: every task and goal, across all principals
//! (the CLI's `ahp task list|show` and `ahp goal list|show`).
//!
//! The operator (whoever holds the data directory) is trusted, so these take no
//! [`Caller`](crate::conversation::Caller) and are never reachable from a tool. They still never
//! show a principal digest or an idempotency key.

use super::attempt::{self, ATTEMPT_COLUMNS, TaskAttempt};
use super::goal::{self, GOAL_COLUMNS, Goal};
use super::task::{self, AgentTask, TASK_COLUMNS, TaskQuery, TaskRow};
use crate::conversation::ConversationResult as Result;
use crate::conversation::agent;
use crate::conversation::bounds;
use crate::conversation::state::TaskState;
use crate::db::Store;

impl Store {
    /// Every task ordered by id after the exclusive cursor `after`, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`ConversationError::InvalidInput`](crate::conversation::ConversationError::InvalidInput)
    /// for a bad limit or cursor; a corrupt row fails closed.
    #[cfg(any(test, feature = "testing"))]
    pub fn operator_tasks(&mut self, after: Option<&str>, limit: usize) -> Result<Vec<AgentTask>> {
        let query = TaskQuery {
            after: after.map(str::to_owned),
            ..TaskQuery::default()
        };
        self.operator_tasks_matching(&query, limit)
    }

    /// Every task matching `query` (assignee, creator, state, goal; each absent filter matches
    /// all) ordered by id after its cursor, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`ConversationError::InvalidInput`](crate::conversation::ConversationError::InvalidInput)
    /// for a bad limit, cursor or filter id; a corrupt row fails closed.
    pub fn operator_tasks_matching(&mut self, query: &TaskQuery, limit: usize) -> Result<Vec<AgentTask>> {
        bounds::page_limit(limit)?;
        for a in [&query.assignee, &query.creator].into_iter().flatten() {
            agent::check_id(a)?;
        }
        if let Some(g) = &query.goal {
            goal::check_id(g)?;
        }
        if let Some(t) = &query.after {
            task::check_id(t)?;
        }
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM agent_tasks
              WHERE (?1 IS NULL OR assignee_agent_id = ?1) AND (?2 IS NULL OR creator_agent_id = ?2)
                AND (?3 IS NULL OR state = ?3) AND (?4 IS NULL OR goal_id = ?4) AND id > ?5
              ORDER BY id LIMIT ?6"
        );
        let rows: Vec<TaskRow> = self
            .autocommit()
            .prepare_cached(&sql)?
            .query_map(
                ahp_store_sql::params![
                    &query.assignee,
                    &query.creator,
                    query.state.map(TaskState::as_str),
                    &query.goal,
                    query.after.as_deref().unwrap_or(""),
                    limit as i64
                ],
                |r| Ok(task::from_row(r)),
            )?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .collect::<Result<_>>()?;
        rows.into_iter()
            .map(|row| task::full(&self.autocommit(), row))
            .collect()
    }

    /// Every attempt of the task `task`, oldest first.
    ///
    /// # Errors
    ///
    /// [`ConversationError::TaskNotFound`](crate::conversation::ConversationError::TaskNotFound).
    pub fn operator_task_attempts(&mut self, task: &str) -> Result<Vec<TaskAttempt>> {
        task::check_id(task)?;
        task::load(&self.autocommit(), task)?;
        let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM agent_task_attempts WHERE task_id = ?1 ORDER BY number");
        self.autocommit()
            .prepare_cached(&sql)?
            .query_map([task], |r| Ok(attempt::from_row(r)))?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .collect()
    }

    /// The task `task`, with its newest attempt.
    ///
    /// # Errors
    ///
    /// [`ConversationError::TaskNotFound`](crate::conversation::ConversationError::TaskNotFound).
    pub fn operator_task(&mut self, task: &str) -> Result<AgentTask> {
        task::check_id(task)?;
        let tx = self.autocommit();
        task::full(&tx, task::load(&tx, task)?)
    }

    /// Every goal ordered by id after the exclusive cursor `after`, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`ConversationError::InvalidInput`](crate::conversation::ConversationError::InvalidInput)
    /// for a bad limit or cursor; a corrupt row fails closed.
    pub fn operator_goals(&mut self, after: Option<&str>, limit: usize) -> Result<Vec<Goal>> {
        bounds::page_limit(limit)?;
        if let Some(g) = after {
            goal::check_id(g)?;
        }
        let sql = format!("SELECT {GOAL_COLUMNS} FROM goals WHERE id > ?1 ORDER BY id LIMIT ?2");
        self.autocommit()
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
    pub fn operator_goal(&mut self, goal: &str) -> Result<Goal> {
        goal::check_id(goal)?;
        goal::load(&self.autocommit(), goal)
    }
}
