//! Messages: the append-only transcript, and `post_message` — the one transaction that appends a
//! message, allocates its seq, queues a delivery for every other agent participant, coalesces or
//! creates each recipient's wake, updates the conversation and records idempotency, or does none
//! of it.
//!
//! Each conversation owns a monotonic `next_seq`; messages are unique by `(conversation, seq)`,
//! so the seqs of a conversation are exactly `1..=n`. Transcript reads take an exclusive
//! `after_seq` cursor and never consume anything. Every message records its author's provenance:
//! the human participant, or the agent with the exact endpoint and generation it posted through.
//! A reply target is resolved only inside the already-authorized conversation.

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;
use serde_json::json;

use super::audit::{self, AuditKind};
use super::bounds::{self, MAX_MESSAGE_BODY_BYTES, MAX_MESSAGES_PER_CONVERSATION};
use super::conversation::{self, Acting, ConversationState};
use super::delivery;
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::{Check, IdempotencyKey, Mutation, Operation};
use super::ids::MESSAGE_ID_PREFIX;
use super::mcp_task::{self, Awaited, McpTask};
use super::principal::Caller;
use super::scope::Scope;
use super::wake;
use crate::clock::Timestamp;
use crate::db::Store;
use crate::id::new_id;

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Author {
    /// The conversation's human participant.
    Human,
    /// An agent participant, through the exact endpoint and generation it posted with.
    #[serde(rename_all = "camelCase")]
    Agent {
        /// `agt_…`.
        agent_id: String,
        /// `ep_…`.
        endpoint_id: String,
        /// The endpoint's controller generation at the time.
        generation: u64,
    },
}

/// One transcript entry. Its `Debug` shows the body's size, never the body.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptMessage {
    /// `msg_…`.
    pub id: String,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// Its position in the conversation, from 1, without gaps.
    pub seq: u64,
    /// Who wrote it.
    pub author: Author,
    /// Its text.
    pub body: String,
    /// The message it replies to, in the same conversation.
    pub reply_to: Option<String>,
    /// When it was posted.
    pub created_at: Timestamp,
}

/// What `post_message` takes. Its `Debug` shows the body's size, never the body.
#[derive(Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// `cv_…`.
    pub conversation: String,
    /// Who posts: the human participant, or an agent through its current endpoint.
    pub acting: Acting,
    /// 1 to [`MAX_MESSAGE_BODY_BYTES`] bytes.
    pub body: String,
    /// A message of the same conversation this one answers.
    pub reply_to: Option<String>,
    /// What makes a retry safe.
    pub idempotency: IdempotencyKey,
}

impl std::fmt::Debug for TranscriptMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptMessage")
            .field("id", &self.id)
            .field("conversation_id", &self.conversation_id)
            .field("seq", &self.seq)
            .field("author", &self.author)
            .field("body_bytes", &self.body.len())
            .field("reply_to", &self.reply_to)
            .field("created_at", &self.created_at)
            .finish()
    }
}

impl std::fmt::Debug for NewMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewMessage")
            .field("conversation", &self.conversation)
            .field("acting", &self.acting)
            .field("body_bytes", &self.body.len())
            .field("reply_to", &self.reply_to)
            .field("idempotency", &self.idempotency)
            .finish()
    }
}

/// What `post_message` did: the message as a [`Mutation`] reports any write, its `woken` the
/// agents the post woke — the recipients of the deliveries it created, in the conversation's
/// participant order.
///
/// A replayed post created no delivery and woke nobody: its `woken` is empty (the original post
/// already woke its recipients, and their wakes are durable). So is that of a post into a
/// conversation with no other agent participant.
pub type Posted = Mutation<TranscriptMessage>;

/// The canonical request hashed for idempotency: deliberately without the endpoint and
/// generation, so that an exact retry recovers the original message across a replacement.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PostRequest<'a> {
    conversation: &'a str,
    author_agent: Option<&'a str>,
    body: &'a str,
    reply_to: Option<&'a str>,
}

pub(crate) const MESSAGE_COLUMNS: &str = "m.id, m.conversation_id, m.seq, m.author_kind, m.author_agent_id, m.author_endpoint_id, m.author_generation, m.body, m.reply_to, m.created_at";

/// Reads a message selected with [`MESSAGE_COLUMNS`] starting at column `at`.
pub(crate) fn from_row_at(r: &Row, at: usize) -> Result<TranscriptMessage> {
    let id: String = r.get(at)?;
    let kind: String = r.get(at + 3)?;
    let author = match kind.as_str() {
        "human" => Author::Human,
        "agent" => {
            let generation: Option<i64> = r.get(at + 6)?;
            match (
                r.get::<_, Option<String>>(at + 4)?,
                r.get::<_, Option<String>>(at + 5)?,
                generation,
            ) {
                (Some(agent_id), Some(endpoint_id), Some(g)) if g >= 1 => Author::Agent {
                    agent_id,
                    endpoint_id,
                    generation: g as u64,
                },
                _ => {
                    return Err(Error::corrupt(
                        "messages",
                        format!("{id}: agent author without provenance"),
                    ));
                }
            }
        }
        other => {
            return Err(Error::corrupt(
                "messages",
                format!("{id}: unknown author kind {other:?}"),
            ));
        }
    };
    let seq: i64 = r.get(at + 2)?;
    Ok(TranscriptMessage {
        conversation_id: r.get(at + 1)?,
        seq: u64::try_from(seq).map_err(|_| Error::corrupt("messages", format!("{id}: seq")))?,
        author,
        body: r.get(at + 7)?,
        reply_to: r.get(at + 8)?,
        created_at: Timestamp::from_micros(r.get(at + 9)?),
        id,
    })
}

fn load_in(conn: &Tx<'_>, conversation: &str, message: &str) -> Result<TranscriptMessage> {
    let sql = format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?1 AND m.conversation_id = ?2");
    conn.prepare_cached(&sql)?
        .query_row((message, conversation), |r| Ok(from_row_at(r, 0)))
        .optional()?
        .unwrap_or_else(|| Err(Error::MessageNotFound(message.to_owned())))
}

pub(crate) fn check_id(message: &str) -> Result<()> {
    bounds::id("messageId", message, MESSAGE_ID_PREFIX)
}

impl NewMessage {
    fn validate(&self) -> Result<()> {
        self.acting.validate()?;
        conversation::check_id(&self.conversation)?;
        bounds::text("body", &self.body, MAX_MESSAGE_BODY_BYTES, false)?;
        if let Some(r) = &self.reply_to {
            check_id(r)?;
        }
        self.idempotency.validate()?;
        if matches!(self.idempotency, IdempotencyKey::WakeReply { .. }) && self.acting == Acting::Human {
            return Err(Error::invalid(
                "idempotency",
                "a wake-reply identity is only for agent-authored messages",
            ));
        }
        Ok(())
    }

    fn request(&self) -> PostRequest<'_> {
        PostRequest {
            conversation: &self.conversation,
            author_agent: match &self.acting {
                Acting::Human => None,
                Acting::Agent(a) => Some(&a.agent),
            },
            body: &self.body,
            reply_to: self.reply_to.as_deref(),
        }
    }
}

impl Store {
    /// Posts a message. In one `BEGIN IMMEDIATE` transaction: checks for an exact replay (before
    /// any endpoint or lifecycle check, so a committed post can be recovered after its endpoint
    /// went away), authorizes the author, appends the message with the conversation's next seq,
    /// queues one delivery for every agent participant other than the author, coalesces each
    /// recipient's pending wake (or creates one), and records the idempotency key. Returns the
    /// message and the agents it woke ([`Posted::woken`]; none for a replay).
    ///
    /// A turn's reply answers for good: an agent's reply under a wake-reply identity whose
    /// `reply_to` is a queued delivery of the acting agent consumes that delivery in the reply's
    /// own commit, so no later turn (after a crash, say) sees the answered message queued and
    /// answers it again. A post under an ordinary idempotency key (an agent acting through the
    /// MCP tools) consumes nothing: its caller consumes what it processed explicitly.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`]; [`Error::IdempotencyConflict`] for a reused key with a different
    /// request; [`Error::ConversationNotFound`] outside the caller's reach; the endpoint admission
    /// errors for an agent author; [`Error::ConversationClosed`]; [`Error::MessageNotFound`] for a
    /// reply target outside the conversation; [`Error::WakeNotFound`] / [`Error::InvalidWakeState`] for a
    /// wake-reply identity whose wake is not the author's or has not crossed the dispatch fence;
    /// [`Error::LimitReached`] past [`MAX_MESSAGES_PER_CONVERSATION`]; [`Error::MissingScope`].
    pub fn post_message(&mut self, caller: &Caller, new: &NewMessage) -> Result<Posted> {
        self.post_message_consuming(caller, new, &[])
    }

    /// [`post_message`](Self::post_message) for an agent in a turn, which also consumes each of
    /// `consumes` (deliveries of the acting agent's inbox the turn consumed and the host held)
    /// in the post's commit, as [`consume_deliveries`](Self::consume_deliveries) would: what a
    /// turn handled before it posted is recorded no later than the post. A replay consumes
    /// nothing (a replayed [`Posted`]; its original commit did).
    ///
    /// # Errors
    ///
    /// As [`post_message`](Self::post_message); [`Error::InvalidInput`] for consumes by a human
    /// author, more than [`MAX_TURN_CONSUMES`](bounds::MAX_TURN_CONSUMES) of them or a malformed
    /// id; [`Error::MessageNotFound`] for a consume of a message not delivered to the agent —
    /// each changing nothing.
    pub fn post_message_consuming(&mut self, caller: &Caller, new: &NewMessage, consumes: &[String]) -> Result<Posted> {
        Ok(self.post(caller, new, consumes, false)?.0)
    }

    /// Posts `new` as the human (as [`post_message`](Self::post_message)) and, in the same
    /// commit, creates the caller's MCP task that waits for an agent's reply to it
    /// ([`mcp_task`]): the next agent message of the conversation that replies to it or to
    /// nothing ends the task, in that message's commit. A replay returns the original message
    /// and its task.
    ///
    /// # Errors
    ///
    /// As `post_message`; [`Error::InvalidInput`] (field `acting`) for an agent author;
    /// [`Error::LimitReached`] at the caller's MCP task bound.
    pub fn ask_agent(&mut self, caller: &Caller, new: &NewMessage) -> Result<(Posted, McpTask)> {
        if new.acting != Acting::Human {
            return Err(Error::invalid("acting", "a question is asked as the human participant"));
        }
        let (posted, task) = self.post(caller, new, &[], true)?;
        let task = task.ok_or_else(|| {
            Error::invalid(
                "idempotencyKey",
                "this key was used by a post_message, not an ask_agent: use a new key",
            )
        })?;
        Ok((posted, task))
    }

    /// The post path of [`post_message_consuming`](Self::post_message_consuming) and
    /// [`ask_agent`](Self::ask_agent) (`ask`: with its MCP task).
    fn post(
        &mut self,
        caller: &Caller,
        new: &NewMessage,
        consumes: &[String],
        ask: bool,
    ) -> Result<(Posted, Option<McpTask>)> {
        caller.require(Scope::Manage)?;
        new.validate()?;
        delivery::check_consumes(consumes)?;
        if !consumes.is_empty() && new.acting == Acting::Human {
            return Err(Error::invalid("consumes", "only an agent consumes deliveries"));
        }
        let check = Check::new(Operation::PostMessage, &new.idempotency, &new.request());
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            if let Acting::Agent(actor) = &new.acting {
                super::admission::refuse_host_held(&tx, caller, actor)?;
            }
            if let Some(id) = check.replay(&tx, caller.principal(), now)? {
                let original = load_in(&tx, &new.conversation, &id)?;
                let asked = if ask {
                    mcp_task::created_for(&tx, caller.principal(), &question(&original))?
                } else {
                    None
                };
                return Ok((Mutation::replayed(original), asked));
            }
            let (message, woken) = append(&tx, caller, new, now)?;
            let asked = if ask {
                Some(mcp_task::create_in(
                    &tx,
                    caller.principal(),
                    "ask_agent",
                    &question(&message),
                    now,
                )?)
            } else {
                None
            };
            if let Acting::Agent(actor) = &new.acting {
                delivery::consume_all_in(&tx, actor, consumes, now)?;
                if let (Some(answered), IdempotencyKey::WakeReply { .. }) = (&new.reply_to, &new.idempotency) {
                    delivery::consume_if_queued(&tx, actor, answered, now)?;
                }
            }
            check.record(&tx, caller.principal(), &message.id, now)?;
            tx.commit()?;
            let posted = Mutation {
                woken,
                ..Mutation::changed(message)
            };
            Ok((posted, asked))
        })
    }

    /// One message of `conversation`, read as its human participant (what an `ask_agent` task
    /// reports: the question and the reply).
    ///
    /// # Errors
    ///
    /// [`Error::ConversationNotFound`] outside the caller's reach; [`Error::MessageNotFound`]
    /// for a message not in it; [`Error::InvalidInput`] for a malformed id;
    /// [`Error::MissingScope`] without `communication:read`.
    pub fn read_message(&mut self, caller: &Caller, conversation: &str, id: &str) -> Result<TranscriptMessage> {
        caller.require(Scope::Read)?;
        conversation::check_id(conversation)?;
        check_id(id)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            conversation::authorize(&tx, caller, &Acting::Human, conversation, now)?;
            load_in(&tx, conversation, id)
        })
    }

    /// Transcript entries of a conversation with seq greater than `after_seq`, oldest first, at
    /// most `limit`. Reading consumes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::ConversationNotFound`] outside the caller's reach; endpoint admission errors when
    /// acting as an agent; [`Error::InvalidInput`] for a bad limit; [`Error::MissingScope`]
    /// without `communication:read`.
    pub fn read_transcript(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        conversation: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<TranscriptMessage>> {
        caller.require(Scope::Read)?;
        acting.validate()?;
        conversation::check_id(conversation)?;
        bounds::page_limit(limit)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            conversation::authorize(&tx, caller, acting, conversation, now)?;
            let sql = format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.conversation_id = ?1 AND m.seq > ?2 ORDER BY m.seq LIMIT ?3"
            );
            let mut stmt = tx.prepare_cached(&sql)?;
            let rows = stmt.query_map(
                (conversation, i64::try_from(after_seq).unwrap_or(i64::MAX), limit as i64),
                |r| Ok(from_row_at(r, 0)),
            )?;
            rows.map(|r| r?).collect()
        })
    }
}

/// What a question `message` waits for: an agent's reply to it.
fn question(message: &TranscriptMessage) -> Awaited {
    Awaited::Reply {
        conversation: message.conversation_id.clone(),
        question: message.id.clone(),
        seq: message.seq,
    }
}

/// The body of `post_message` after the replay check: authorize, append, deliver, wake. Returns
/// the message and the agents it woke.
fn append(tx: &Tx<'_>, caller: &Caller, new: &NewMessage, now: Timestamp) -> Result<(TranscriptMessage, Vec<String>)> {
    let (conv, ep) = conversation::authorize(tx, caller, &new.acting, &new.conversation, now)?;
    if let (IdempotencyKey::WakeReply { wake, .. }, Some(ep)) = (&new.idempotency, &ep) {
        wake::check_reply_identity(tx, &ep.agent_id, wake)?;
    }
    if conv.state != ConversationState::Open {
        return Err(Error::ConversationClosed(conv.id));
    }
    let seq = conv.next_seq;
    if seq > MAX_MESSAGES_PER_CONVERSATION {
        return Err(Error::LimitReached {
            what: "messages per conversation",
            limit: MAX_MESSAGES_PER_CONVERSATION,
        });
    }
    if let Some(target) = &new.reply_to {
        load_in(tx, &conv.id, target)?;
    }
    // The counter first: its row lock is what orders two posts to one conversation. On
    // PostgreSQL the second waits for the first's commit and then fails with 40001 (run again
    // by the write path); inserting the message first, it would instead collide on
    // `(conversation_id, seq)` with a unique violation, which is not retried.
    let advanced = tx
        .prepare_cached(
            "UPDATE conversations SET next_seq = next_seq + 1, last_message_at = ?3, updated_at = ?3
             WHERE id = ?1 AND next_seq = ?2",
        )?
        .execute((&conv.id, seq as i64, now.as_micros()))?;
    if advanced != 1 {
        return Err(Error::corrupt(
            "conversations",
            format!("{} seq moved under its own write transaction", conv.id),
        ));
    }
    let id = new_id(MESSAGE_ID_PREFIX);
    let (kind, agent, endpoint, generation) = match &ep {
        None => ("human", None, None, None),
        Some(ep) => (
            "agent",
            Some(ep.agent_id.as_str()),
            Some(ep.id.as_str()),
            Some(ep.generation as i64),
        ),
    };
    tx.prepare_cached(
        "INSERT INTO messages (id, conversation_id, seq, author_kind, author_principal, author_agent_id,
                               author_endpoint_id, author_generation, body, reply_to, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute((
        &id,
        &conv.id,
        seq as i64,
        kind,
        caller.principal().as_str(),
        agent,
        endpoint,
        generation,
        &new.body,
        &new.reply_to,
        now.as_micros(),
    ))?;
    if agent.is_some() {
        // An agent's message answers the questions asked before it (`ask_agent`), in its commit.
        mcp_task::answer_replies(tx, &conv.id, seq, &id, new.reply_to.as_deref(), now)?;
    }
    let mut woken = Vec::new();
    for recipient in conversation::agent_ids(tx, &conv.id)? {
        if Some(recipient.as_str()) == agent {
            continue;
        }
        let order = delivery::queue(tx, &id, &recipient, now)?;
        wake::coalesce(tx, &recipient, order, now)?;
        woken.push(recipient);
    }
    audit::record(
        tx,
        AuditKind::MessagePosted,
        agent,
        Some(&conv.id),
        json!({
            "messageId": id,
            "seq": seq,
            "author": kind,
            "endpointId": endpoint,
            "deliveries": woken.len(),
            "replyTo": new.reply_to,
        }),
        now,
    )?;
    let message = TranscriptMessage {
        id,
        conversation_id: conv.id,
        seq,
        author: match ep {
            None => Author::Human,
            Some(ep) => Author::Agent {
                agent_id: ep.agent_id,
                endpoint_id: ep.id,
                generation: ep.generation,
            },
        },
        body: new.body.clone(),
        reply_to: new.reply_to.clone(),
        created_at: now,
    };
    Ok((message, woken))
}
