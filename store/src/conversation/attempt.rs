//! Wake delivery attempts and the durable dispatch fence.
//!
//! A wake reaches its agent through *attempts*, each bound to one endpoint and generation:
//!
//! ```text
//! claim ──► claimed ──prepare_dispatch (the fence)──► dispatched ──finish──► accepted
//!              │                                          │      └─finish─► delivery_unknown
//!              └─ lease ran out / endpoint gone ─► released (wake pending again)
//!                                        endpoint gone / takeover ─┘ ──────► delivery_unknown
//!                    accepted ── endpoint gone / takeover / carrier settles ─► delivery_unknown
//! dispatched | accepted | delivery_unknown ──consume──► consumed
//! ```
//!
//! **`accepted` without a consume** means the carrier saw the host take the turn, but the
//! agent never proved it ran by consuming the wake — and a wake can be consumed only through
//! the endpoint and generation it was dispatched through. So once that endpoint stops being
//! current (replaced, detached, expired, or a takeover), or its carrier declares that no turn
//! of it is running ([`Store::settle_unconfirmed_attempts`]), an `accepted` attempt is settled
//! exactly like a `dispatched` one: `delivery_unknown`, audited, never redispatched. A host
//! carrier never leaves `accepted` behind itself: it records a turn's end, outcome and consume,
//! in one transaction ([`Store::finish_turn`]).
//!
//! Before the fence, a failed or expired claim is *released* and the same wake is pending again.
//! After the fence the carrier may have started a turn, so an unconfirmed outcome becomes
//! `delivery_unknown` and is never redispatched automatically; only new deliveries make a new
//! wake. [`Store::consume_wake`] is exact: wake id, target agent, current endpoint, generation
//! and the opaque consume token minted at the fence must all match. Consuming a wake never
//! consumes a delivery.

use std::fmt;

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::audit::{self, AuditKind};
use super::bounds::{self, MAX_UNRESOLVED_DISPATCHED_WAKES_PER_AGENT};
use super::endpoint::AgentActor;
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::Mutation;
use super::ids::{ATTEMPT_ID_PREFIX, CONSUME_TOKEN_PREFIX};
use super::state::{AttemptEvent, AttemptState, WakeEvent, WakeState};
use super::wake::{Wake, load_for, load_wake, nonneg};
use crate::clock::Timestamp;
#[cfg(doc)]
use crate::db::Store;

/// One attempt to deliver a wake through one endpoint and generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeAttempt {
    /// `wka_…`.
    pub id: String,
    /// The wake.
    pub wake_id: String,
    /// The endpoint it is bound to.
    pub endpoint_id: String,
    /// That endpoint's generation.
    pub generation: u64,
    /// Its state.
    pub state: AttemptState,
    /// When the claim lapses if the fence is not crossed.
    pub claim_expires_at: Timestamp,
    /// When it was claimed.
    pub claimed_at: Timestamp,
    /// When it crossed the fence.
    pub dispatched_at: Option<Timestamp>,
    /// When it was released, finished or consumed.
    pub finished_at: Option<Timestamp>,
}

/// What [`Store::claim_wake`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeClaim {
    /// The wake, now `claimed`.
    pub wake: Wake,
    /// The new attempt.
    pub attempt: WakeAttempt,
}

/// What [`Store::prepare_dispatch`] returns: the carrier hands `consume_token` to the agent's
/// turn, which presents it to [`Store::consume_wake`]. The store keeps only its hash, and its
/// `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchTicket {
    /// The wake, now `dispatched`.
    pub wake: Wake,
    /// The attempt, now `dispatched`.
    pub attempt: WakeAttempt,
    /// Opaque, single-attempt: `wct_` and 64 hex digits.
    pub consume_token: String,
}

impl fmt::Debug for DispatchTicket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatchTicket")
            .field("wake", &self.wake)
            .field("attempt", &self.attempt)
            .field("consume_token", &"<redacted>")
            .finish()
    }
}

/// What a carrier reports after the fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchOutcome {
    /// The host accepted the turn.
    Accepted,
    /// The carrier cannot say whether the turn started.
    Unknown,
}

impl DispatchOutcome {
    /// The attempt event that records it.
    pub(super) fn event(self) -> AttemptEvent {
        match self {
            Self::Accepted => AttemptEvent::Accept,
            Self::Unknown => AttemptEvent::Unknown,
        }
    }
}

pub(super) const ATTEMPT_COLUMNS: &str =
    "id, wake_id, endpoint_id, generation, state, claim_expires_at, claimed_at, dispatched_at, finished_at";

pub(super) fn attempt_from_row(r: &Row) -> Result<WakeAttempt> {
    let id: String = r.get(0)?;
    let state: String = r.get(4)?;
    let state = state
        .parse()
        .map_err(|e| Error::corrupt("wake_attempts", format!("{id}: {e}")))?;
    Ok(WakeAttempt {
        wake_id: r.get(1)?,
        endpoint_id: r.get(2)?,
        generation: nonneg("wake_attempts", &id, r.get(3)?)?,
        state,
        claim_expires_at: Timestamp::from_micros(r.get(5)?),
        claimed_at: Timestamp::from_micros(r.get(6)?),
        dispatched_at: r.get::<_, Option<i64>>(7)?.map(Timestamp::from_micros),
        finished_at: r.get::<_, Option<i64>>(8)?.map(Timestamp::from_micros),
        id,
    })
}

/// Loads `attempt` if it is bound to `endpoint`; otherwise [`Error::AttemptNotFound`].
pub(super) fn load_attempt_for(conn: &Tx<'_>, endpoint: &str, attempt: &str) -> Result<WakeAttempt> {
    let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM wake_attempts WHERE id = ?1 AND endpoint_id = ?2");
    conn.prepare_cached(&sql)?
        .query_row((attempt, endpoint), |r| Ok(attempt_from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::AttemptNotFound(attempt.to_owned())))
}

pub(super) fn check_attempt_id(attempt: &str) -> Result<()> {
    bounds::id("attemptId", attempt, ATTEMPT_ID_PREFIX)
}

pub(super) fn token_hash(token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"ahp:wake-consume-token:v1\0");
    h.update(token.as_bytes());
    hex::encode(h.finalize())
}

/// Constant-time equality of two equal-length hex digests.
fn digest_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Releases `attempt` (claimed, before the fence) and returns its wake to pending.
pub(super) fn release(tx: &Tx<'_>, attempt: &str, wake: &str, now: Timestamp) -> Result<()> {
    let changed = tx
        .prepare_cached(
            "UPDATE wake_attempts SET state = 'released', finished_at = ?2 WHERE id = ?1 AND state = 'claimed'",
        )?
        .execute((attempt, now.as_micros()))?;
    tx.prepare_cached("UPDATE wakes SET state = 'pending', updated_at = ?2 WHERE id = ?1 AND state = 'claimed'")?
        .execute((wake, now.as_micros()))?;
    if changed == 1 {
        let w = load_wake(tx, wake)?;
        audit::record(
            tx,
            AuditKind::WakeReleased,
            Some(&w.agent_id),
            None,
            json!({ "wakeId": wake, "attemptId": attempt }),
            now,
        )?;
    }
    Ok(())
}

/// The attempts (bound to `endpoint`, or all) that are not known to be finished — claimed,
/// dispatched, or accepted and not yet consumed — parsed, so an attempt in a state this build
/// does not know fails closed instead of being skipped by a filter on the known in-flight
/// states.
fn unfinished(tx: &Tx<'_>, endpoint: Option<&str>, agent: Option<&str>) -> Result<Vec<WakeAttempt>> {
    let sql = format!(
        "SELECT {ATTEMPT_COLUMNS} FROM wake_attempts
         WHERE state NOT IN ('released', 'delivery_unknown', 'consumed')
           AND (?1 IS NULL OR endpoint_id = ?1) AND (?2 IS NULL OR agent_id = ?2)"
    );
    tx.prepare_cached(&sql)?
        .query_map((endpoint, agent), |r| Ok(attempt_from_row(r)))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .collect()
}

/// Reconciles the in-flight attempts bound to `endpoint`, or (with `None`) all of them: claimed
/// ones are released; dispatched ones, and accepted ones never consumed, become
/// `delivery_unknown` (see the [module docs](self)). Returns (released, unknown).
fn reconcile_attempts(tx: &Tx<'_>, endpoint: Option<&str>, now: Timestamp) -> Result<(u64, u64)> {
    let (mut released, mut unknown) = (0, 0);
    for a in unfinished(tx, endpoint, None)? {
        match a.state {
            AttemptState::Claimed => {
                release(tx, &a.id, &a.wake_id, now)?;
                released += 1;
            }
            AttemptState::Dispatched | AttemptState::Accepted => {
                mark_unknown(tx, &a, now)?;
                unknown += 1;
            }
            _ => {}
        }
    }
    Ok((released, unknown))
}

/// Moves the post-fence attempt `a` (dispatched, or accepted and never consumed) to
/// `delivery_unknown` and audits it.
pub(super) fn mark_unknown(tx: &Tx<'_>, a: &WakeAttempt, now: Timestamp) -> Result<()> {
    tx.prepare_cached(
        "UPDATE wake_attempts SET state = 'delivery_unknown', finished_at = ?2
         WHERE id = ?1 AND state IN ('dispatched', 'accepted')",
    )?
    .execute((&a.id, now.as_micros()))?;
    crate::conversation::delegation::attempt::wake_delivery_unknown(tx, &a.wake_id, now)?;
    let w = load_wake(tx, &a.wake_id)?;
    audit::record(
        tx,
        AuditKind::WakeDeliveryUnknown,
        Some(&w.agent_id),
        None,
        json!({ "wakeId": a.wake_id, "attemptId": a.id, "endpointId": a.endpoint_id, "from": a.state.as_str() }),
        now,
    )
}

/// The post-fence attempts through `endpoint` not yet resolved: dispatched, or accepted and
/// never consumed.
pub(super) fn unconfirmed(tx: &Tx<'_>, endpoint: &str) -> Result<Vec<WakeAttempt>> {
    Ok(unfinished(tx, Some(endpoint), None)?
        .into_iter()
        .filter(|a| matches!(a.state, AttemptState::Dispatched | AttemptState::Accepted))
        .collect())
}

/// Reconciles the attempts of an endpoint that stopped being current.
pub(crate) fn reconcile_endpoint(tx: &Tx<'_>, endpoint: &str, now: Timestamp) -> Result<(u64, u64)> {
    reconcile_attempts(tx, Some(endpoint), now)
}

/// Releases the claims on `endpoint` that have not crossed the dispatch fence (their wakes are
/// pending again), leaving dispatched attempts alone: used when the endpoint stops being
/// wake-capable, so that no new turn starts while a running one may still finish and consume.
pub(crate) fn release_claims(tx: &Tx<'_>, endpoint: &str, now: Timestamp) -> Result<u64> {
    let mut released = 0;
    for a in unfinished(tx, Some(endpoint), None)? {
        if a.state == AttemptState::Claimed {
            release(tx, &a.id, &a.wake_id, now)?;
            released += 1;
        }
    }
    Ok(released)
}

/// Reconciles every in-flight attempt (successor takeover).
pub(crate) fn reconcile_all(tx: &Tx<'_>, now: Timestamp) -> Result<(u64, u64)> {
    reconcile_attempts(tx, None, now)
}

/// Releases the claims whose lease has passed, for one agent or (with `None`) all.
pub(super) fn release_expired(tx: &Tx<'_>, agent: Option<&str>, now: Timestamp) -> Result<u64> {
    let mut released = 0;
    for a in unfinished(tx, None, agent)? {
        if a.state == AttemptState::Claimed && a.claim_expires_at <= now {
            release(tx, &a.id, &a.wake_id, now)?;
            released += 1;
        }
    }
    Ok(released)
}

/// Refuses a new fence crossing for `agent` while [`MAX_UNRESOLVED_DISPATCHED_WAKES_PER_AGENT`]
/// of its wakes are dispatched through its current endpoint `endpoint` and not yet consumed or
/// found `delivery_unknown`: a turn for it is already running.
pub(super) fn check_unresolved(tx: &Tx<'_>, agent: &str, endpoint: &str) -> Result<()> {
    let unresolved: i64 = tx
        .prepare_cached(
            "SELECT count(*) FROM wakes w JOIN wake_attempts a ON a.wake_id = w.id
             WHERE w.agent_id = ?1 AND w.state NOT IN ('pending', 'claimed', 'consumed')
               AND a.consume_token_hash IS NOT NULL AND a.endpoint_id = ?2
               AND a.state NOT IN ('released', 'delivery_unknown', 'consumed')",
        )?
        .query_row((agent, endpoint), |r| r.get(0))?;
    if unresolved as u64 >= MAX_UNRESOLVED_DISPATCHED_WAKES_PER_AGENT {
        return Err(Error::LimitReached {
            what: "unresolved dispatched wakes per agent (consume the outstanding one first)",
            limit: MAX_UNRESOLVED_DISPATCHED_WAKES_PER_AGENT,
        });
    }
    Ok(())
}

/// Checks a consume token's shape before any lookup.
pub(super) fn check_consume_token(consume_token: &str) -> Result<()> {
    let token_ok = consume_token
        .strip_prefix(CONSUME_TOKEN_PREFIX)
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    if !token_ok {
        return Err(Error::invalid(
            "consumeToken",
            format!("must be {CONSUME_TOKEN_PREFIX} followed by 64 lowercase hex digits"),
        ));
    }
    Ok(())
}

/// Records the carrier's outcome `event` (accept or unknown) for the attempt `a` of `agent`,
/// already admitted: see [`Store::finish_dispatch`]. Only a dispatched attempt takes a reported
/// outcome; the same outcome again, or any after a consume, is a no-op.
pub(super) fn finish(
    tx: &Tx<'_>,
    agent: &str,
    a: WakeAttempt,
    event: AttemptEvent,
    now: Timestamp,
) -> Result<Mutation<WakeAttempt>> {
    // Same outcome again, or the agent already consumed the wake (it ran): nothing to record.
    if AttemptState::Dispatched.after(event) == Some(a.state) || a.state == AttemptState::Consumed {
        return Ok(Mutation::unchanged(a));
    }
    // A reported outcome is final for the carrier (only reconciliation settles an accepted one).
    let to = match a.state {
        AttemptState::Dispatched => a.state.after(event),
        _ => None,
    };
    let Some(to) = to else {
        return Err(Error::InvalidAttemptState {
            attempt: a.id,
            operation: "finish",
            state: a.state,
        });
    };
    tx.prepare_cached("UPDATE wake_attempts SET state = ?2, finished_at = ?3 WHERE id = ?1 AND state = 'dispatched'")?
        .execute((&a.id, to.as_str(), now.as_micros()))?;
    let a = load_attempt(tx, &a.id)?;
    if to == AttemptState::DeliveryUnknown {
        crate::conversation::delegation::attempt::wake_delivery_unknown(tx, &a.wake_id, now)?;
        audit::record(
            tx,
            AuditKind::WakeDeliveryUnknown,
            Some(agent),
            None,
            json!({ "wakeId": a.wake_id, "attemptId": a.id, "endpointId": a.endpoint_id }),
            now,
        )?;
    }
    Ok(Mutation::changed(a))
}

/// Consumes `wake` for the already admitted `actor` with `consume_token`: see
/// [`Store::consume_wake`].
pub(super) fn consume(
    tx: &Tx<'_>,
    actor: &AgentActor,
    wake: &str,
    consume_token: &str,
    now: Timestamp,
) -> Result<Mutation<Wake>> {
    let w = load_for(tx, &actor.agent, wake)?;
    if w.state != WakeState::Consumed && w.state.after(WakeEvent::Consume).is_none() {
        return Err(Error::InvalidWakeState {
            wake: w.id,
            operation: "consume",
            state: w.state,
        });
    }
    let sql = format!(
        "SELECT {ATTEMPT_COLUMNS}, consume_token_hash FROM wake_attempts
         WHERE wake_id = ?1 AND consume_token_hash IS NOT NULL"
    );
    let (a, hash): (WakeAttempt, String) = tx
        .prepare_cached(&sql)?
        .query_row([&w.id], |r| Ok(attempt_from_row(r).map(|a| (a, r.get::<_, String>(9)))))
        .optional()?
        .ok_or_else(|| Error::corrupt("wakes", format!("{} is {} without a fenced attempt", w.id, w.state)))
        .and_then(|r| {
            let (a, h) = r?;
            Ok((a, h?))
        })?;
    if a.endpoint_id != actor.endpoint || a.generation != actor.generation {
        return Err(Error::ConsumeRefused {
            wake: w.id,
            reason: "it was dispatched through another endpoint or generation",
        });
    }
    if !digest_eq(&hash, &token_hash(consume_token)) {
        return Err(Error::ConsumeRefused {
            wake: w.id,
            reason: "the consume token does not match",
        });
    }
    if w.state == WakeState::Consumed {
        return Ok(Mutation::unchanged(w));
    }
    tx.prepare_cached("UPDATE wake_attempts SET state = 'consumed', finished_at = ?2 WHERE id = ?1")?
        .execute((&a.id, now.as_micros()))?;
    tx.prepare_cached(
        "UPDATE wakes SET state = 'consumed', consumed_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'dispatched'",
    )?
    .execute((&w.id, now.as_micros()))?;
    let w = load_wake(tx, &w.id)?;
    audit::record(
        tx,
        AuditKind::WakeConsumed,
        Some(&actor.agent),
        None,
        json!({ "wakeId": w.id, "attemptId": a.id, "endpointId": a.endpoint_id, "deliveryCount": w.delivery_count }),
        now,
    )?;
    Ok(Mutation::changed(w))
}

pub(super) fn load_attempt(conn: &Tx<'_>, attempt: &str) -> Result<WakeAttempt> {
    let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM wake_attempts WHERE id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([attempt], |r| Ok(attempt_from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::AttemptNotFound(attempt.to_owned())))
}
