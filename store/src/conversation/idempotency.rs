//! Principal-scoped idempotency for create-agent, attach-endpoint, create-conversation and
//! post-message.
//!
//! A caller sends a key it generated. The store keeps only a SHA-256 of the key and a SHA-256 of
//! the canonical request (a fixed-field-order serialization, so the hash does not depend on map
//! ordering or serde features), scoped by principal and operation. A retry with the same key and
//! the same request returns the original resource with `replayed = true, state_changed = false`;
//! the same key with a different request is rejected. Records are kept for
//! [`IDEMPOTENCY_RETENTION`] and pruned on the principal's next keyed write; past it, the same
//! key starts a new operation. The record commits in the same
//! transaction as the resource it names, so there is never a record without its resource or the
//! reverse.
//!
//! After a wake has crossed its dispatch fence, a reply may instead use the wake id and an
//! operation index as its identity ([`IdempotencyKey::WakeReply`]); the store derives an
//! internal key from the pair that no caller-supplied key can equal.

use ahp_store_sql::{OptionalExtension, Tx};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::bounds::{self, IDEMPOTENCY_RETENTION, MAX_IDEMPOTENCY_KEY_BYTES, MAX_WAKE_REPLY_OPERATIONS};
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::ids::WAKE_ID_PREFIX;
use super::principal::CommunicationPrincipal;
use crate::clock::Timestamp;

/// The result of a mutation: the resource, and whether this call changed anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mutation<T> {
    /// The resource as it now is (for a replay: the original resource).
    pub value: T,
    /// This call was an exact replay of an earlier one with the same idempotency key.
    pub replayed: bool,
    /// This call changed durable state (false for replays and desired-state no-ops).
    pub state_changed: bool,
    /// The agents whose wake this call created or gave a cause to, in its own transaction,
    /// each once, by id: whom its caller schedules. Empty for a replay, a no-op, and the writes
    /// that wake nobody. Reported by the delegation writes and by a post
    /// ([`Posted`](super::message::Posted)).
    #[serde(skip)]
    pub woken: Vec<String>,
}

impl<T> Mutation<T> {
    pub(crate) fn changed(value: T) -> Self {
        Self {
            value,
            replayed: false,
            state_changed: true,
            woken: Vec::new(),
        }
    }

    pub(crate) fn unchanged(value: T) -> Self {
        Self {
            value,
            replayed: false,
            state_changed: false,
            woken: Vec::new(),
        }
    }

    pub(crate) fn replayed(value: T) -> Self {
        Self {
            value,
            replayed: true,
            state_changed: false,
            woken: Vec::new(),
        }
    }
}

/// The identity that makes a post-message retry safe. Its `Debug` never shows a key.
#[derive(Clone, PartialEq, Eq)]
pub enum IdempotencyKey {
    /// A caller-generated key: 1 to [`MAX_IDEMPOTENCY_KEY_BYTES`] printable ASCII characters.
    Key(String),
    /// A reply resumed from a dispatched wake: the wake id plus an operation index below
    /// [`MAX_WAKE_REPLY_OPERATIONS`]. Different indexes are different intentional replies.
    WakeReply {
        /// The wake (`wk_…`), which must have crossed its dispatch fence.
        wake: String,
        /// Which reply of that wake this is.
        index: u32,
    },
}

impl std::fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Key(_) => f.write_str("Key(<redacted>)"),
            Self::WakeReply { wake, index } => f
                .debug_struct("WakeReply")
                .field("wake", wake)
                .field("index", index)
                .finish(),
        }
    }
}

impl From<&str> for IdempotencyKey {
    fn from(key: &str) -> Self {
        Self::Key(key.to_owned())
    }
}

impl IdempotencyKey {
    /// Checks the key's bounds.
    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            Self::Key(k) => validate_key(k),
            Self::WakeReply { wake, index } => {
                bounds::id("wakeId", wake, WAKE_ID_PREFIX)?;
                if *index >= MAX_WAKE_REPLY_OPERATIONS {
                    return Err(Error::invalid(
                        "operationIndex",
                        format!("must be below {MAX_WAKE_REPLY_OPERATIONS}"),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The stored hash. A wake-reply identity hashes a form containing a NUL byte, which no
    /// valid caller key contains, so the two kinds can never collide.
    pub(crate) fn hash(&self) -> String {
        match self {
            Self::Key(k) => key_hash(k),
            Self::WakeReply { wake, index } => key_hash(&format!("\0wake-reply\0{wake}\0{index}")),
        }
    }
}

/// Checks a caller-generated key: 1 to [`MAX_IDEMPOTENCY_KEY_BYTES`] printable ASCII characters.
pub(crate) fn validate_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_BYTES || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::invalid(
            "idempotencyKey",
            format!("must be 1 to {MAX_IDEMPOTENCY_KEY_BYTES} printable ASCII characters"),
        ));
    }
    Ok(())
}

/// The operations that take an idempotency key; the name is part of the record's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    CreateAgent,
    AttachEndpoint,
    CreateConversation,
    PostMessage,
    CreateTask,
    RegisterWait,
    CreateGoal,
    CheckpointGoal,
}

impl Operation {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::CreateAgent => "create_agent",
            Self::AttachEndpoint => "attach_endpoint",
            Self::CreateConversation => "create_conversation",
            Self::PostMessage => "post_message",
            Self::CreateTask => "create_agent_task",
            Self::RegisterWait => "register_agent_wait",
            Self::CreateGoal => "create_goal",
            Self::CheckpointGoal => "checkpoint_goal",
        }
    }
}

/// Records created at or before this are past retention.
fn retention_cutoff(now: Timestamp) -> i64 {
    now.as_micros()
        .saturating_sub(i64::try_from(IDEMPOTENCY_RETENTION.as_micros()).unwrap_or(i64::MAX))
}

fn key_hash(key: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"ahp:idempotency-key:v1\0");
    h.update(key.as_bytes());
    hex::encode(h.finalize())
}

/// SHA-256 of the canonical form of `request` for `op`.
pub(crate) fn request_hash<T: Serialize>(op: Operation, request: &T) -> String {
    let mut h = Sha256::new();
    h.update(b"ahp:idempotency-request:v1\0");
    h.update(op.as_str().as_bytes());
    h.update(b"\0");
    h.update(serde_json::to_vec(request).expect("requests serialize"));
    hex::encode(h.finalize())
}

/// A pending idempotency check: the hashes to look up now and record on success.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    op: Operation,
    key_hash: String,
    request_hash: String,
}

impl Check {
    pub(crate) fn new<T: Serialize>(op: Operation, key: &IdempotencyKey, request: &T) -> Self {
        Self {
            op,
            key_hash: key.hash(),
            request_hash: request_hash(op, request),
        }
    }

    /// The resource an exact earlier request created, if any.
    ///
    /// # Errors
    ///
    /// [`Error::IdempotencyConflict`] if the key was used for a different request.
    pub(crate) fn replay(
        &self,
        tx: &Tx<'_>,
        principal: &CommunicationPrincipal,
        now: Timestamp,
    ) -> Result<Option<String>> {
        let found: Option<(String, String)> = tx
            .prepare_cached(
                "SELECT request_hash, resource_id FROM communication_idempotency
                 WHERE principal = ?1 AND operation = ?2 AND key_hash = ?3 AND created_at > ?4",
            )?
            .query_row(
                (
                    principal.as_str(),
                    self.op.as_str(),
                    &self.key_hash,
                    retention_cutoff(now),
                ),
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match found {
            None => Ok(None),
            Some((hash, resource)) if hash == self.request_hash => Ok(Some(resource)),
            Some(_) => Err(Error::IdempotencyConflict {
                operation: self.op.as_str(),
            }),
        }
    }

    /// Records that this request created `resource`.
    pub(crate) fn record(
        &self,
        tx: &Tx<'_>,
        principal: &CommunicationPrincipal,
        resource: &str,
        now: Timestamp,
    ) -> Result<()> {
        // Retention: the principal's records past IDEMPOTENCY_RETENTION go first (including an
        // expired one under this very key, which `replay` already ignored).
        tx.prepare_cached("DELETE FROM communication_idempotency WHERE principal = ?1 AND created_at <= ?2")?
            .execute((principal.as_str(), retention_cutoff(now)))?;
        tx.prepare_cached(
            "INSERT INTO communication_idempotency (principal, operation, key_hash, request_hash, resource_id, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute((
            principal.as_str(),
            self.op.as_str(),
            &self.key_hash,
            &self.request_hash,
            resource,
            now.as_micros(),
        ))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bounds() {
        assert!(validate_key(&"k".repeat(MAX_IDEMPOTENCY_KEY_BYTES)).is_ok());
        assert!(validate_key(&"k".repeat(MAX_IDEMPOTENCY_KEY_BYTES + 1)).is_err());
        assert!(validate_key("").is_err());
        assert!(validate_key("has space").is_err());
        let wake = crate::id::new_id(WAKE_ID_PREFIX);
        let ok = IdempotencyKey::WakeReply {
            wake: wake.clone(),
            index: MAX_WAKE_REPLY_OPERATIONS - 1,
        };
        assert!(ok.validate().is_ok());
        let past = IdempotencyKey::WakeReply {
            wake,
            index: MAX_WAKE_REPLY_OPERATIONS,
        };
        assert!(matches!(
            past.validate(),
            Err(Error::InvalidInput {
                field: "operationIndex",
                ..
            })
        ));
    }

    #[test]
    fn request_hash_is_pinned() {
        #[derive(Serialize)]
        struct R<'a> {
            a: &'a str,
            b: u32,
        }
        // The canonical form is the struct's field order; pin it so a change is deliberate.
        let h = request_hash(Operation::CreateAgent, &R { a: "x", b: 1 });
        let mut expect = Sha256::new();
        expect.update(b"ahp:idempotency-request:v1\0create_agent\0{\"a\":\"x\",\"b\":1}");
        assert_eq!(h, hex::encode(expect.finalize()));
    }
}
