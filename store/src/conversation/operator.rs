//! The operator's reads: every agent, conversation and transcript, across all principals.
//!
//! The operator (whoever holds the data directory: the CLI) is trusted, so these take no
//! [`Caller`](super::Caller) and are never reachable from a tool. They still never show a
//! principal digest, an idempotency key or a consume token.

use super::agent::{self, AGENT_COLUMNS, Agent};
use super::bounds;
use super::conversation::{self, COLUMNS as CONVERSATION_COLUMNS, Conversation};
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::message::{MESSAGE_COLUMNS, TranscriptMessage, from_row_at};
use crate::db::Store;

impl Store {
    /// Every agent ordered by id after the exclusive cursor `after`, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad limit or cursor; a corrupt row fails closed.
    pub fn operator_agents(&mut self, after: Option<&str>, limit: usize) -> Result<Vec<Agent>> {
        bounds::page_limit(limit)?;
        if let Some(a) = after {
            agent::check_id(a)?;
        }
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id > ?1 ORDER BY id LIMIT ?2");
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map((after.unwrap_or(""), limit as i64), |r| Ok(agent::from_row(r)))?;
        rows.map(|r| r?).collect()
    }

    /// Every conversation ordered by id after the exclusive cursor `after`, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad limit or cursor; a corrupt row fails closed.
    pub fn operator_conversations(&mut self, after: Option<&str>, limit: usize) -> Result<Vec<Conversation>> {
        bounds::page_limit(limit)?;
        if let Some(a) = after {
            conversation::check_id(a)?;
        }
        let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id > ?1 ORDER BY id LIMIT ?2");
        let rows: Vec<conversation::Row0> = self
            .autocommit()
            .prepare_cached(&sql)?
            .query_map((after.unwrap_or(""), limit as i64), |r| Ok(conversation::from_row(r)))?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .collect::<Result<_>>()?;
        rows.into_iter()
            .map(|r| conversation::project(&self.autocommit(), r))
            .collect()
    }

    /// One conversation and its transcript after `after_seq`, at most `limit` messages.
    ///
    /// # Errors
    ///
    /// [`Error::ConversationNotFound`]; [`Error::InvalidInput`] for a bad id or limit.
    pub fn operator_conversation(
        &mut self,
        conversation: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<(Conversation, Vec<TranscriptMessage>)> {
        conversation::check_id(conversation)?;
        bounds::page_limit(limit)?;
        let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?1");
        let row = self
            .autocommit()
            .prepare_cached(&sql)?
            .query_row([conversation], |r| Ok(conversation::from_row(r)))
            .map_err(|e| match e {
                ahp_store_sql::SqlError::NoRows => Error::ConversationNotFound(conversation.to_owned()),
                e => e.into(),
            })??;
        let c = conversation::project(&self.autocommit(), row)?;
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.conversation_id = ?1 AND m.seq > ?2 ORDER BY m.seq LIMIT ?3"
        );
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            (conversation, i64::try_from(after_seq).unwrap_or(i64::MAX), limit as i64),
            |r| Ok(from_row_at(r, 0)),
        )?;
        let messages = rows.map(|r| r?).collect::<Result<_>>()?;
        Ok((c, messages))
    }
}
