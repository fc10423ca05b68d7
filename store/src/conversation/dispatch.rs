//! The operations of a wake's delivery, for a carrier acting through an agent's exact
//! endpoint: claim a pending wake, cross the dispatch fence (`prepare_dispatch`, which mints
//! the consume token), report the outcome after it, consume the wake; and the reads and the
//! lapse of claims around them. The attempt's state machine and its transactions are
//! [`attempt`](super::attempt)'s; each operation here is one admitted transaction over them.

use std::time::Duration;

use ahp_store_sql::Tx;
use serde_json::json;

use super::admission;
use super::attempt::{
    ATTEMPT_COLUMNS, DispatchOutcome, DispatchTicket, WakeAttempt, WakeClaim, attempt_from_row, check_attempt_id,
    check_consume_token, check_unresolved, consume, finish, load_attempt, load_attempt_for, release, release_expired,
    token_hash,
};
use super::audit::{self, AuditKind};
use super::bounds::{self, MAX_CLAIM_LEASE, MIN_CLAIM_LEASE};
use super::endpoint::AgentActor;
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::Mutation;
use super::ids::{ATTEMPT_ID_PREFIX, CONSUME_TOKEN_PREFIX};
use super::principal::Caller;
use super::scope::Scope;
use super::state::{AttemptEvent, WakeState};
use super::wake::{WAKE_COLUMNS, Wake, check_wake_id, load_for, load_wake, wake_from_row};
use crate::clock::Timestamp;
use crate::db::Store;
use crate::id::{new_id, random_bytes};

/// Claims the acting agent's pending wake through its admitted endpoint (see
/// [`Store::claim_wake`]), in `tx`: for the host's push carrier (`app_binding` `None`) or for
/// the MCP App View whose binding fence hashes to `app_binding` ([`super::app_carrier`]).
pub(super) fn claim_in(
    tx: &Tx<'_>,
    caller: &Caller,
    actor: &AgentActor,
    lease: Duration,
    app_binding: Option<&str>,
    now: Timestamp,
) -> Result<Option<WakeClaim>> {
    let ep = admission::admit(tx, caller, actor, now)?;
    if !ep.wake_capable {
        return Err(Error::NotWakeCapable(ep.id));
    }
    release_expired(tx, Some(&actor.agent), now)?;
    // Every wake not known to be past the fence, parsed: an unknown state fails closed.
    let sql =
        format!("SELECT {WAKE_COLUMNS} FROM wakes WHERE agent_id = ?1 AND state NOT IN ('dispatched', 'consumed')");
    let open: Vec<Wake> = tx
        .prepare_cached(&sql)?
        .query_map([&actor.agent], |r| Ok(wake_from_row(r)))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .collect::<Result<_>>()?;
    let Some(w) = open.into_iter().find(|w| w.state == WakeState::Pending) else {
        return Ok(None);
    };
    check_unresolved(tx, &actor.agent, &ep.id)?;
    let attempt = new_id(ATTEMPT_ID_PREFIX);
    tx.prepare_cached(
        "INSERT INTO wake_attempts (id, wake_id, agent_id, endpoint_id, generation, state, claim_expires_at, claimed_at, seq,
                                    carrier, app_binding_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, 'claimed', ?6, ?7, (SELECT coalesce(max(seq), 0) + 1 FROM wake_attempts WHERE wake_id = ?2),
                 ?8, ?9)",
    )?
    .execute((
        &attempt,
        &w.id,
        &actor.agent,
        &ep.id,
        ep.generation as i64,
        now.saturating_add(lease).as_micros(),
        now.as_micros(),
        if app_binding.is_some() { "mcp_app" } else { "host" },
        app_binding,
    ))?;
    tx.prepare_cached("UPDATE wakes SET state = 'claimed', updated_at = ?2 WHERE id = ?1 AND state = 'pending'")?
        .execute((&w.id, now.as_micros()))?;
    let claim = WakeClaim {
        wake: load_wake(tx, &w.id)?,
        attempt: load_attempt(tx, &attempt)?,
    };
    audit::record(
        tx,
        AuditKind::WakeClaimed,
        Some(&actor.agent),
        None,
        json!({ "wakeId": w.id, "attemptId": attempt, "endpointId": ep.id, "controllerGeneration": ep.generation }),
        now,
    )?;
    Ok(Some(claim))
}

/// Takes the claimed attempt `a` (of the acting endpoint, its claim not expired) across the
/// dispatch fence (see [`Store::prepare_dispatch`]), in `tx`.
pub(super) fn dispatch_in(tx: &Tx<'_>, actor: &AgentActor, a: WakeAttempt, now: Timestamp) -> Result<DispatchTicket> {
    if a.state.after(AttemptEvent::Dispatch).is_none() {
        return Err(Error::InvalidAttemptState {
            attempt: a.id,
            operation: "prepare dispatch of",
            state: a.state,
        });
    }
    let token = format!("{CONSUME_TOKEN_PREFIX}{}", hex::encode(random_bytes::<32>()));
    tx.prepare_cached(
        "UPDATE wake_attempts SET state = 'dispatched', consume_token_hash = ?2, dispatched_at = ?3
         WHERE id = ?1 AND state = 'claimed'",
    )?
    .execute((&a.id, token_hash(&token), now.as_micros()))?;
    tx.prepare_cached(
        "UPDATE wakes SET state = 'dispatched', dispatched_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'claimed'",
    )?
    .execute((&a.wake_id, now.as_micros()))?;
    let ticket = DispatchTicket {
        wake: load_wake(tx, &a.wake_id)?,
        attempt: load_attempt(tx, &a.id)?,
        consume_token: token,
    };
    audit::record(
        tx,
        AuditKind::WakeDispatched,
        Some(&actor.agent),
        None,
        json!({ "wakeId": a.wake_id, "attemptId": a.id, "endpointId": a.endpoint_id }),
        now,
    )?;
    Ok(ticket)
}

/// Crosses the fence for the loaded attempt `a` and commits `tx` — or, if its claim lapsed,
/// commits its release instead and refuses with [`Error::ClaimExpired`] (the wake is pending
/// again).
pub(super) fn prepare_in(
    tx: ahp_store_sql::Transaction<'_>,
    actor: &AgentActor,
    a: WakeAttempt,
    now: Timestamp,
) -> Result<DispatchTicket> {
    if a.state.after(AttemptEvent::Dispatch).is_some() && now >= a.claim_expires_at {
        release(&tx, &a.id, &a.wake_id, now)?;
        tx.commit()?;
        return Err(Error::ClaimExpired(a.id));
    }
    let ticket = dispatch_in(&tx, actor, a, now)?;
    tx.commit()?;
    Ok(ticket)
}

impl Store {
    /// Claims the acting agent's pending wake for a delivery attempt through its current,
    /// wake-capable endpoint, leased for `lease`. Expired claims of this agent are released
    /// first. `Ok(None)` when nothing is pending (including a wake another attempt holds).
    ///
    /// # Errors
    ///
    /// The endpoint admission errors (a stale generation is refused);
    /// [`Error::NotWakeCapable`]; [`Error::InvalidInput`] for a lease outside
    /// [`MIN_CLAIM_LEASE`]..=[`MAX_CLAIM_LEASE`]; [`Error::MissingScope`].
    pub fn claim_wake(&mut self, caller: &Caller, actor: &AgentActor, lease: Duration) -> Result<Option<WakeClaim>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        bounds::lease("lease", lease, MIN_CLAIM_LEASE, MAX_CLAIM_LEASE)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let claim = claim_in(&tx, caller, actor, lease, None, now)?;
            tx.commit()?;
            Ok(claim)
        })
    }

    /// [`claim_wake`](Self::claim_wake) and [`prepare_dispatch`](Self::prepare_dispatch) in one
    /// transaction: claims the acting agent's pending wake and crosses the durable dispatch
    /// fence for it at once, so the turn starts one commit after the post rather than two. The
    /// attempt is audited as claimed and dispatched, as by the two calls. `Ok(None)` when
    /// nothing is pending. A failure changes nothing: the wake stays pending, unclaimed.
    ///
    /// # Errors
    ///
    /// Those of [`claim_wake`](Self::claim_wake).
    pub fn claim_and_dispatch(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        lease: Duration,
    ) -> Result<Option<DispatchTicket>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        bounds::lease("lease", lease, MIN_CLAIM_LEASE, MAX_CLAIM_LEASE)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let Some(claim) = claim_in(&tx, caller, actor, lease, None, now)? else {
                tx.commit()?;
                return Ok(None);
            };
            let ticket = dispatch_in(&tx, actor, claim.attempt, now)?;
            tx.commit()?;
            Ok(Some(ticket))
        })
    }

    /// Crosses the durable dispatch fence for a claimed attempt: from here on the wake is never
    /// dispatched again. Returns the opaque consume token (only its hash is stored). Call it
    /// immediately before handing the turn to the host.
    ///
    /// # Errors
    ///
    /// [`Error::ClaimExpired`] if the claim lease ran out (the wake is pending again);
    /// [`Error::InvalidAttemptState`] unless the attempt is claimed (a retry after the fence is
    /// refused: finish it as [`DispatchOutcome::Unknown`]); [`Error::AttemptNotFound`] for an
    /// attempt not bound to this endpoint; the endpoint admission errors; [`Error::MissingScope`].
    pub fn prepare_dispatch(&mut self, caller: &Caller, actor: &AgentActor, attempt: &str) -> Result<DispatchTicket> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        check_attempt_id(attempt)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::admit(&tx, caller, actor, now)?;
            let a = load_attempt_for(&tx, &actor.endpoint, attempt)?;
            prepare_in(tx, actor, a, now)
        })
    }

    /// Records the carrier's outcome for a dispatched attempt: `accepted` or `delivery_unknown`.
    /// Reporting the outcome the attempt already has, or any outcome after the agent consumed the
    /// wake, is a no-op; changing a reported outcome is refused.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidAttemptState`] unless the attempt is dispatched (or already has this outcome);
    /// [`Error::AttemptNotFound`]; the endpoint admission errors; [`Error::MissingScope`].
    pub fn finish_dispatch(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        attempt: &str,
        outcome: DispatchOutcome,
    ) -> Result<Mutation<WakeAttempt>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        check_attempt_id(attempt)?;
        let event = outcome.event();
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::admit(&tx, caller, actor, now)?;
            let a = load_attempt_for(&tx, &actor.endpoint, attempt)?;
            let finished = finish(&tx, &actor.agent, a, event, now)?;
            tx.commit()?;
            Ok(finished)
        })
    }

    /// Consumes a dispatched wake: the wake must target the acting agent, and its post-fence
    /// attempt must be bound to the acting (current) endpoint and generation and have minted
    /// `consume_token`. An exact retry after success is a no-op. Deliveries are untouched.
    ///
    /// # Errors
    ///
    /// [`Error::WakeNotFound`] for a wake of another agent (or none); [`Error::InvalidWakeState`] before
    /// the fence; [`Error::ConsumeRefused`] naming the field that did not match; the endpoint
    /// admission errors; [`Error::InvalidInput`] for a malformed token; [`Error::MissingScope`].
    pub fn consume_wake(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        wake: &str,
        consume_token: &str,
    ) -> Result<Mutation<Wake>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        check_wake_id(wake)?;
        check_consume_token(consume_token)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::admit(&tx, caller, actor, now)?;
            let consumed = consume(&tx, actor, wake, consume_token, now)?;
            tx.commit()?;
            Ok(consumed)
        })
    }

    /// The attempts of one of the acting agent's wakes, oldest first, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`Error::WakeNotFound`]; the endpoint admission errors; [`Error::InvalidInput`] for a
    /// limit outside 1..=[`MAX_PAGE_LIMIT`](bounds::MAX_PAGE_LIMIT); [`Error::MissingScope`].
    pub fn wake_attempts(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        wake: &str,
        limit: usize,
    ) -> Result<Vec<WakeAttempt>> {
        caller.require(Scope::Read)?;
        actor.validate()?;
        check_wake_id(wake)?;
        bounds::page_limit(limit)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            admission::admit(&tx, caller, actor, now)?;
            load_for(&tx, &actor.agent, wake)?;
            let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM wake_attempts WHERE wake_id = ?1 ORDER BY seq LIMIT ?2");
            let mut stmt = tx.prepare_cached(&sql)?;
            let rows = stmt.query_map((wake, limit as i64), |r| Ok(attempt_from_row(r)))?;
            rows.map(|r| r?).collect()
        })
    }

    /// Host-side: releases every claim whose lease has passed back to its pending wake (claims
    /// are also released lazily by [`Store::claim_wake`]). Returns how many were released.
    ///
    /// # Errors
    ///
    /// Only if SQLite fails.
    #[cfg(any(test, feature = "testing"))]
    pub fn release_expired_claims(&mut self) -> Result<u64> {
        self.retrying(|s| {
            let (tx, now) = s.begin_immediate()?;
            let n = release_expired(&tx, None, now)?;
            tx.commit()?;
            Ok(n)
        })
    }
}
