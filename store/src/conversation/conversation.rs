//! Conversations and their participants.
//!
//! A conversation is a durable communication space with one human participant — the principal
//! that created it — and up to [`MAX_AGENT_PARTICIPANTS`] agent participants, each of which the
//! creator must own. It is `open` (accepting messages and participants) or `closed`. Participation
//! authorizes communication only. A conversation is visible to its human participant, and to an
//! agent participant acting through its exact current endpoint; to anyone else it does not
//! exist.

use std::fmt;
use std::str::FromStr;

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::admission;
use super::agent;
use super::audit::{self, AuditKind};
use super::bounds::{
    self, MAX_AGENT_PARTICIPANTS, MAX_CONVERSATIONS, MAX_OPEN_CONVERSATIONS_PER_PRINCIPAL, MAX_TITLE_BYTES,
};
use super::endpoint::{AgentActor, Endpoint};
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::{Check, IdempotencyKey, Mutation, Operation, validate_key};
use super::ids::CONVERSATION_ID_PREFIX;
use super::principal::Caller;
use super::scope::Scope;
use crate::clock::Timestamp;
use crate::db::Store;
use crate::id::new_id;

/// Whether a conversation accepts new messages and participants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationState {
    /// Accepting messages.
    Open,
    /// Read-only.
    Closed,
}

impl ConversationState {
    /// Every state.
    pub const ALL: [ConversationState; 2] = [Self::Open, Self::Closed];

    /// The stored and serialized name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
        }
    }
}

impl fmt::Display for ConversationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ConversationState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown conversation state {s:?}"))
    }
}

/// Who is acting on a conversation: its human participant, or an agent through its endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acting {
    /// The caller's principal, which must be the conversation's human participant.
    Human,
    /// An agent participant, admitted through its exact current endpoint and generation.
    Agent(AgentActor),
}

impl Acting {
    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            Self::Human => Ok(()),
            Self::Agent(a) => a.validate(),
        }
    }
}

/// What `create_conversation` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewConversation {
    /// 1 to [`MAX_TITLE_BYTES`] bytes.
    pub title: String,
    /// Distinct agents the caller owns, at most [`MAX_AGENT_PARTICIPANTS`].
    pub agents: Vec<String>,
}

/// A conversation as a participant sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    /// `cv_…`.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Open or closed.
    pub state: ConversationState,
    /// The agent participants, in the order they joined.
    pub agents: Vec<String>,
    /// Messages posted so far (also the seq of the newest one).
    pub message_count: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When anything about it last changed.
    pub updated_at: Timestamp,
    /// When the newest message was posted.
    pub last_message_at: Option<Timestamp>,
    /// When it was closed.
    pub closed_at: Option<Timestamp>,
}

/// The row, before participants are attached.
#[derive(Debug, Clone)]
pub(crate) struct Row0 {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) state: ConversationState,
    pub(crate) next_seq: u64,
    pub(crate) created_at: Timestamp,
    pub(crate) updated_at: Timestamp,
    pub(crate) last_message_at: Option<Timestamp>,
    pub(crate) closed_at: Option<Timestamp>,
}

pub(super) const COLUMNS: &str = "id, title, state, next_seq, created_at, updated_at, last_message_at, closed_at";

pub(super) fn from_row(r: &Row) -> Result<Row0> {
    let id: String = r.get(0)?;
    let state: String = r.get(2)?;
    let state = state
        .parse()
        .map_err(|e| Error::corrupt("conversations", format!("{id}: {e}")))?;
    let next_seq: i64 = r.get(3)?;
    Ok(Row0 {
        title: r.get(1)?,
        state,
        next_seq: u64::try_from(next_seq).map_err(|_| Error::corrupt("conversations", format!("{id}: next_seq")))?,
        created_at: Timestamp::from_micros(r.get(4)?),
        updated_at: Timestamp::from_micros(r.get(5)?),
        last_message_at: r.get::<_, Option<i64>>(6)?.map(Timestamp::from_micros),
        closed_at: r.get::<_, Option<i64>>(7)?.map(Timestamp::from_micros),
        id,
    })
}

pub(crate) fn check_id(conversation: &str) -> Result<()> {
    bounds::id("conversationId", conversation, CONVERSATION_ID_PREFIX)
}

/// The agent participants of `conversation`, in join order.
pub(crate) fn agent_ids(conn: &Tx<'_>, conversation: &str) -> Result<Vec<String>> {
    let mut stmt =
        conn.prepare_cached("SELECT agent_id FROM conversation_agents WHERE conversation_id = ?1 ORDER BY position")?;
    let ids = stmt
        .query_map([conversation], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(ids)
}

pub(super) fn project(conn: &Tx<'_>, row: Row0) -> Result<Conversation> {
    let agents = agent_ids(conn, &row.id)?;
    Ok(Conversation {
        agents,
        message_count: row.next_seq - 1,
        id: row.id,
        title: row.title,
        state: row.state,
        created_at: row.created_at,
        updated_at: row.updated_at,
        last_message_at: row.last_message_at,
        closed_at: row.closed_at,
    })
}

/// Loads `conversation` for `acting`, scoped before any state is read: for a human, the caller
/// must be its human participant; for an agent, the endpoint is admitted first and the agent
/// must be a participant. Anything else is [`Error::ConversationNotFound`]. Returns the row and,
/// for an agent, its admitted endpoint.
pub(crate) fn authorize(
    conn: &Tx<'_>,
    caller: &Caller,
    acting: &Acting,
    conversation: &str,
    now: Timestamp,
) -> Result<(Row0, Option<Endpoint>)> {
    let (found, ep) = match acting {
        Acting::Human => {
            let sql = format!("SELECT {COLUMNS} FROM conversations WHERE id = ?1 AND human_principal = ?2");
            let found = conn
                .prepare_cached(&sql)?
                .query_row((conversation, caller.principal().as_str()), |r| Ok(from_row(r)))
                .optional()?;
            (found, None)
        }
        Acting::Agent(actor) => {
            let ep = admission::admit(conn, caller, actor, now)?;
            let sql = format!(
                "SELECT {COLUMNS} FROM conversations c WHERE c.id = ?1 AND EXISTS
                   (SELECT 1 FROM conversation_agents p WHERE p.conversation_id = c.id AND p.agent_id = ?2)"
            );
            let found = conn
                .prepare_cached(&sql)?
                .query_row((conversation, &actor.agent), |r| Ok(from_row(r)))
                .optional()?;
            (found, Some(ep))
        }
    };
    let row = found.ok_or_else(|| Error::ConversationNotFound(conversation.to_owned()))??;
    Ok((row, ep))
}

/// The conversation as `acting` may see it (see [`authorize`]).
pub(crate) fn summary(
    conn: &Tx<'_>,
    caller: &Caller,
    acting: &Acting,
    conversation: &str,
    now: Timestamp,
) -> Result<Conversation> {
    let (row, _) = authorize(conn, caller, acting, conversation, now)?;
    project(conn, row)
}

fn load_human(conn: &Tx<'_>, caller: &Caller, conversation: &str) -> Result<Row0> {
    Ok(authorize(conn, caller, &Acting::Human, conversation, Timestamp::from_micros(0))?.0)
}

fn add_agent(
    tx: &Tx<'_>,
    caller: &Caller,
    conversation: &str,
    agent: &str,
    position: usize,
    now: Timestamp,
) -> Result<()> {
    agent::load_owned(tx, caller.principal(), agent)?;
    tx.prepare_cached(
        "INSERT INTO conversation_agents (conversation_id, agent_id, position, added_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute((conversation, agent, position as i64, now.as_micros()))?;
    Ok(())
}

impl Store {
    /// Creates a conversation whose human participant is the caller, with the given agents
    /// (each of which the caller must own). Idempotent on `idempotency_key`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad title, a duplicated or malformed agent id, more than
    /// [`MAX_AGENT_PARTICIPANTS`] agents, or a bad key; [`Error::AgentNotFound`] for an agent the
    /// caller does not own; [`Error::LimitReached`] past
    /// [`MAX_OPEN_CONVERSATIONS_PER_PRINCIPAL`] or [`MAX_CONVERSATIONS`];
    /// [`Error::IdempotencyConflict`];
    /// [`Error::MissingScope`].
    pub fn create_conversation(
        &mut self,
        caller: &Caller,
        new: &NewConversation,
        idempotency_key: &str,
    ) -> Result<Mutation<Conversation>> {
        caller.require(Scope::Manage)?;
        bounds::text("title", &new.title, MAX_TITLE_BYTES, false)?;
        if new.agents.len() > MAX_AGENT_PARTICIPANTS {
            return Err(Error::invalid(
                "agents",
                format!("at most {MAX_AGENT_PARTICIPANTS} agent participants"),
            ));
        }
        for (i, a) in new.agents.iter().enumerate() {
            agent::check_id(a)?;
            if new.agents[..i].contains(a) {
                return Err(Error::invalid("agents", format!("agent {a} listed twice")));
            }
        }
        validate_key(idempotency_key)?;
        let check = Check::new(
            Operation::CreateConversation,
            &IdempotencyKey::from(idempotency_key),
            new,
        );
        self.retrying(|s| {
            let (tx, now) = s.begin_immediate()?;
            if let Some(id) = check.replay(&tx, caller.principal(), now)? {
                let row = load_human(&tx, caller, &id)?;
                return Ok(Mutation::replayed(project(&tx, row)?));
            }
            // Counted as "not closed", so a row in a state this build does not know takes a slot
            // (fails closed) instead of being skipped.
            let open: i64 = tx
                .prepare_cached("SELECT count(*) FROM conversations WHERE human_principal = ?1 AND state <> 'closed'")?
                .query_row([caller.principal().as_str()], |r| r.get(0))?;
            if open as u64 >= MAX_OPEN_CONVERSATIONS_PER_PRINCIPAL {
                return Err(Error::LimitReached {
                    what: "open conversations per principal",
                    limit: MAX_OPEN_CONVERSATIONS_PER_PRINCIPAL,
                });
            }
            let total: i64 = tx
                .prepare_cached("SELECT count(*) FROM conversations")?
                .query_row([], |r| r.get(0))?;
            if total as u64 >= MAX_CONVERSATIONS {
                return Err(Error::LimitReached {
                    what: "conversations in total",
                    limit: MAX_CONVERSATIONS,
                });
            }
            let id = new_id(CONVERSATION_ID_PREFIX);
            tx.prepare_cached(
                "INSERT INTO conversations (id, title, state, human_principal, next_seq, created_at, updated_at)
                 VALUES (?1, ?2, 'open', ?3, 1, ?4, ?4)",
            )?
            .execute((&id, &new.title, caller.principal().as_str(), now.as_micros()))?;
            for (position, a) in new.agents.iter().enumerate() {
                add_agent(&tx, caller, &id, a, position, now)?;
            }
            check.record(&tx, caller.principal(), &id, now)?;
            audit::record(
                &tx,
                AuditKind::ConversationCreated,
                None,
                Some(&id),
                json!({ "agentCount": new.agents.len() }),
                now,
            )?;
            let c = project(&tx, load_human(&tx, caller, &id)?)?;
            tx.commit()?;
            Ok(Mutation::changed(c))
        })
    }

    /// Adds `agent` (which the caller must own) to an open conversation whose human participant
    /// is the caller. Desired-state idempotent: an agent already participating is a no-op.
    ///
    /// # Errors
    ///
    /// [`Error::ConversationNotFound`] / [`Error::AgentNotFound`] outside the caller's reach;
    /// [`Error::ConversationClosed`]; [`Error::LimitReached`] past [`MAX_AGENT_PARTICIPANTS`];
    /// [`Error::MissingScope`].
    #[cfg(any(test, feature = "testing"))]
    pub fn add_agent_participant(
        &mut self,
        caller: &Caller,
        conversation: &str,
        agent: &str,
    ) -> Result<Mutation<Conversation>> {
        caller.require(Scope::Manage)?;
        check_id(conversation)?;
        agent::check_id(agent)?;
        self.retrying(|s| {
            let (tx, now) = s.begin_immediate()?;
            let row = load_human(&tx, caller, conversation)?;
            agent::load_owned(&tx, caller.principal(), agent)?;
            if row.state != ConversationState::Open {
                return Err(Error::ConversationClosed(conversation.to_owned()));
            }
            let current = agent_ids(&tx, conversation)?;
            if current.iter().any(|a| a == agent) {
                return Ok(Mutation::unchanged(project(&tx, row)?));
            }
            if current.len() >= MAX_AGENT_PARTICIPANTS {
                return Err(Error::LimitReached {
                    what: "agent participants per conversation",
                    limit: MAX_AGENT_PARTICIPANTS as u64,
                });
            }
            add_agent(&tx, caller, conversation, agent, current.len(), now)?;
            audit::record(
                &tx,
                AuditKind::ParticipantAdded,
                Some(agent),
                Some(conversation),
                json!({ "position": current.len() }),
                now,
            )?;
            tx.prepare_cached("UPDATE conversations SET updated_at = ?2 WHERE id = ?1")?
                .execute((conversation, now.as_micros()))?;
            let c = project(&tx, load_human(&tx, caller, conversation)?)?;
            tx.commit()?;
            Ok(Mutation::changed(c))
        })
    }

    /// Closes a conversation whose human participant is the caller. Desired-state idempotent.
    ///
    /// # Errors
    ///
    /// [`Error::ConversationNotFound`] outside the caller's reach; [`Error::MissingScope`].
    pub fn close_conversation(&mut self, caller: &Caller, conversation: &str) -> Result<Mutation<Conversation>> {
        caller.require(Scope::Manage)?;
        check_id(conversation)?;
        self.retrying(|s| {
            let (tx, now) = s.begin_immediate()?;
            let row = load_human(&tx, caller, conversation)?;
            if row.state == ConversationState::Closed {
                return Ok(Mutation::unchanged(project(&tx, row)?));
            }
            tx.prepare_cached(
                "UPDATE conversations SET state = 'closed', closed_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'open'",
            )?
            .execute((conversation, now.as_micros()))?;
            let c = project(&tx, load_human(&tx, caller, conversation)?)?;
            audit::record(
                &tx,
                AuditKind::ConversationClosed,
                None,
                Some(conversation),
                json!({ "messageCount": c.message_count }),
                now,
            )?;
            tx.commit()?;
            Ok(Mutation::changed(c))
        })
    }

    /// One conversation, as its human participant or an agent participant sees it.
    ///
    /// # Errors
    ///
    /// [`Error::ConversationNotFound`] outside the caller's reach; the endpoint admission errors
    /// when acting as an agent; [`Error::MissingScope`] without `communication:read`.
    pub fn get_conversation(&mut self, caller: &Caller, acting: &Acting, conversation: &str) -> Result<Conversation> {
        caller.require(Scope::Read)?;
        acting.validate()?;
        check_id(conversation)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let (row, _) = authorize(&tx, caller, acting, conversation, now)?;
            project(&tx, row)
        })
    }

    /// Conversations the acting agent participates in, ordered by id, after the exclusive cursor
    /// `after`.
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::InvalidInput`] for a bad limit or cursor;
    /// [`Error::MissingScope`] without `communication:read`.
    pub fn list_agent_conversations(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Conversation>> {
        caller.require(Scope::Read)?;
        actor.validate()?;
        bounds::page_limit(limit)?;
        if let Some(a) = after {
            check_id(a)?;
        }
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            admission::admit(&tx, caller, actor, now)?;
            let sql = format!(
                "SELECT {COLUMNS} FROM conversations JOIN conversation_agents p ON p.conversation_id = id
                 WHERE p.agent_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
            );
            let rows: Vec<Row0> = tx
                .prepare_cached(&sql)?
                .query_map((&actor.agent, after.unwrap_or(""), limit as i64), |r| Ok(from_row(r)))?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .collect::<Result<_>>()?;
            rows.into_iter().map(|r| project(&tx, r)).collect()
        })
    }

    /// Conversations whose human participant is the caller, ordered by id, after the exclusive
    /// cursor `after`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad limit or cursor; [`Error::MissingScope`].
    pub fn list_conversations(
        &mut self,
        caller: &Caller,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Conversation>> {
        caller.require(Scope::Read)?;
        bounds::page_limit(limit)?;
        if let Some(a) = after {
            check_id(a)?;
        }
        let sql =
            format!("SELECT {COLUMNS} FROM conversations WHERE human_principal = ?1 AND id > ?2 ORDER BY id LIMIT ?3");
        let rows: Vec<Row0> = self
            .autocommit()
            .prepare_cached(&sql)?
            .query_map((caller.principal().as_str(), after.unwrap_or(""), limit as i64), |r| {
                Ok(from_row(r))
            })?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .collect::<Result<_>>()?;
        rows.into_iter().map(|r| project(&self.autocommit(), r)).collect()
    }
}
