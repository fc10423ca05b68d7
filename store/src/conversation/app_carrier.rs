//! The MCP App pull carrier's side of wake delivery (the conversation seed's G3).
//!
//! A chat host (Claude, ChatGPT, VS Code, …) renders the agent-continuation card as an MCP App.
//! Its live *View* is the carrier, and the server never calls it: the View calls the server.
//! It binds the agent's exact endpoint and generation, then — each call admitted as every
//! agent-acting call is — acquires the agent's next wake through the same claim as the push
//! carrier ([`super::dispatch`]), prepares it (the same durable dispatch fence, which mints the
//! consume token, after its exact binding is checked in the same transaction) immediately
//! before it asks the host to run a turn (`ui/message`), and finishes it with what it saw:
//! `accepted` (the host took the message) or `delivery_unknown`. Accepted is not a turn: only a
//! later exact [`Store::consume_wake`] proves one ran. An attempt past the fence is never
//! prepared again, whatever happens to the View.
//!
//! **Identity, two layers.** The *binding fence* is 128 random bits a View draws when it loads
//! ([`APP_BINDING_PREFIX`] and 32 hex digits): the exact View. The *window key* is what the chat
//! host says of the window the View lives in — from the transport, never from the View's own
//! arguments: continuity across a refresh. The endpoint keeps only their SHA-256 hashes.
//!
//! - **Bind** ([`Store::bind_app_view`]): a View binds an unbound endpoint (from the window
//!   recorded on it, if one is); the same fence again renews the lease and keeps its claim; a
//!   new fence replaces a live binding only from the same window (a refreshed iframe). Whenever
//!   a new fence binds, the attempts of earlier Views are settled as reconciliation settles
//!   them — a claim released, a dispatched or accepted attempt `delivery_unknown` (still
//!   consumable, never re-sent). Any other View is refused ([`Error::AppViewConflict`]).
//! - **Restart.** The host's registry of bindings lives in its process; takeover clears
//!   `wake_capable` and keeps both hashes, so the same View (exact fence) or a refreshed one of
//!   the same window binds again. [`Store::app_carrier_state`] says which View holds the
//!   binding; the host, which knows its registry, tells the View it must rebind
//!   (`host_binding_missing_in_process`).
//! - **Unbind** ([`Store::unbind_app_view`], exact fence only) clears the fence's hash and
//!   `wake_capable`, keeps the window's and releases a claim; a dispatched attempt stays
//!   consumable.
//! - **Expiry.** Natural lease expiry clears the fence's hash and keeps the window's, which only
//!   [`Store::replace_expired_app_endpoint`] reads: the expired E1/g1, still the agent's
//!   current generation and of the same window, becomes a new E2/g2 in one transaction with
//!   its idempotency record; a live endpoint is a no-op; the retry of a lost answer returns the
//!   same E2 while it is current and holds the window, and is stale once a later one exists.
//!   Detach, ordinary replacement and a push carrier's registration clear both hashes.

use std::fmt;
use std::time::Duration;

use ahp_store_sql::{OptionalExtension, Tx};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::admission::{admit, refuse_transfer_bound};
use super::agent::{self, check_id as check_agent_id};
use super::attachment::{attach, attached_lease, renew_when_half_spent, renewal_due, retire};
use super::attempt::{
    DispatchOutcome, DispatchTicket, WakeAttempt, WakeClaim, check_attempt_id, finish, load_attempt, load_attempt_for,
    mark_unknown, release, release_claims, release_expired,
};
use super::audit::{self, AuditKind};
use super::bounds::{self, MAX_CLAIM_LEASE, MIN_CLAIM_LEASE};
use super::dispatch::{claim_in, prepare_in};
use super::endpoint::{AgentActor, Endpoint, check_id as check_endpoint_id, load, load_scoped};
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::Mutation;
use super::principal::Caller;
use super::scope::Scope;
use super::state::{AttemptState, EndpointState};
use crate::clock::Timestamp;
use crate::db::Store;

/// Prefix of an MCP App View's binding fence; 32 lowercase hex digits (128 random bits) follow.
pub const APP_BINDING_PREFIX: &str = "ahp_host_binding_";

/// How long an attempt the chat host accepted may wait for its turn's exact consume before the
/// View's next acquire settles it `delivery_unknown` (never re-sent) and claims the agent's next
/// wake: a chat whose model ignored the message does not hold the agent forever.
pub const MAX_ACCEPTED_WAIT: Duration = Duration::from_secs(10 * 60);

/// Longest window key a chat host may give, in bytes.
pub const MAX_WINDOW_KEY_BYTES: usize = 256;

/// An MCP App View, as each of its calls names it. Its `Debug` shows neither value.
#[derive(Clone, Copy)]
pub struct AppView<'a> {
    /// Its binding fence: [`APP_BINDING_PREFIX`] and 32 lowercase hex digits, drawn from a
    /// secure random source when it loaded.
    pub binding: &'a str,
    /// The chat host's key for the window the View lives in, when the host gives one (1 to
    /// [`MAX_WINDOW_KEY_BYTES`] bytes): from the transport, never from the View's arguments.
    pub window: Option<&'a str>,
}

impl fmt::Debug for AppView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppView")
            .field("binding", &"<redacted>")
            .field("window", &self.window.map(|_| "<redacted>"))
            .finish()
    }
}

/// The hashes an [`AppView`] is stored as.
struct ViewHashes {
    binding: String,
    window: Option<String>,
}

impl AppView<'_> {
    /// Checks both values' shape and returns their hashes.
    fn hashes(&self) -> Result<ViewHashes> {
        let fence_ok = self
            .binding
            .strip_prefix(APP_BINDING_PREFIX)
            .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        if !fence_ok {
            return Err(Error::invalid(
                "bindingId",
                format!("must be {APP_BINDING_PREFIX} followed by 32 lowercase hex digits"),
            ));
        }
        if let Some(w) = self.window
            && (w.is_empty() || w.len() > MAX_WINDOW_KEY_BYTES || w.chars().any(char::is_control))
        {
            return Err(Error::invalid(
                "window",
                format!("must be 1 to {MAX_WINDOW_KEY_BYTES} bytes without control characters"),
            ));
        }
        Ok(ViewHashes {
            binding: digest(self.binding),
            window: self.window.map(digest),
        })
    }
}

fn digest(value: &str) -> String {
    hex::encode(Sha256::digest(value.as_bytes()))
}

/// What [`Store::bind_app_view`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AppBindOutcome {
    /// The View bound an endpoint no View held.
    Bound,
    /// The View already held it: its lease was renewed, its claim kept.
    Renewed,
    /// A refreshed View of the window that held it took it over.
    Rebound,
}

/// What [`Store::bind_app_view`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppBinding {
    /// The endpoint, now wake-capable with its lease renewed.
    pub endpoint: Endpoint,
    /// What the bind did.
    pub outcome: AppBindOutcome,
    /// The attempts of earlier Views this bind settled (released, or `delivery_unknown`).
    pub settled: Vec<WakeAttempt>,
}

/// Which View holds an endpoint's App binding, as seen by one View.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AppBindingHolder {
    /// The asking View (its exact fence).
    ThisView,
    /// No View.
    NoView,
    /// Another View.
    OtherView,
}

/// What [`Store::app_carrier_state`] returns: a View's heartbeat observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppCarrierState {
    /// The endpoint as it stands (its lease renewed when this View holds it).
    pub endpoint: Endpoint,
    /// Which View holds the binding.
    pub holder: AppBindingHolder,
    /// Whether the asking View's window is the one recorded on the endpoint (a refreshed View
    /// of that window may bind in place of the one that holds it).
    pub same_window: bool,
    /// The asking View's attempt not yet resolved: claimed (prepare it), dispatched (finish
    /// it) or accepted (its turn has yet to consume the wake).
    pub attempt: Option<WakeAttempt>,
    /// A wake waits to be acquired.
    pub wake_pending: bool,
}

/// What [`Store::acquire_app_wake`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum AppAcquire {
    /// A pending wake, now claimed by this View: prepare it.
    Claimed {
        /// The claim.
        claim: WakeClaim,
    },
    /// This View's attempt is not resolved yet (see [`AppCarrierState::attempt`]); nothing new
    /// was claimed.
    Open {
        /// The attempt.
        attempt: WakeAttempt,
    },
    /// No wake is pending.
    Idle,
}

/// What [`Store::replace_expired_app_endpoint`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum EndpointRecovery {
    /// The endpoint is live: nothing was done.
    Live {
        /// The endpoint.
        endpoint: Endpoint,
    },
    /// The expired endpoint was replaced by its successor, one generation on.
    Replaced {
        /// The expired endpoint.
        expired: Endpoint,
        /// Its successor, attached for the same principal and window, not yet bound.
        successor: Endpoint,
        /// This answers a retry: the replacement was made by an earlier call.
        replayed: bool,
    },
}

/// The endpoint's recorded binding and window hashes.
fn hashes_of(tx: &Tx<'_>, endpoint: &str) -> Result<(Option<String>, Option<String>)> {
    Ok(tx
        .prepare_cached("SELECT app_binding_hash, app_window_hash FROM agent_endpoints WHERE id = ?1")?
        .query_row([endpoint], |r| Ok((r.get(0)?, r.get(1)?)))?)
}

/// The unresolved attempts through `endpoint` (claimed, dispatched, accepted) whose binding
/// `mine` is (`true`) or is not (`false`) the fence hash `binding`.
fn unresolved(tx: &Tx<'_>, endpoint: &str, binding: &str, mine: bool) -> Result<Vec<WakeAttempt>> {
    let ids: Vec<String> = {
        let mut stmt = tx.prepare_cached(
            "SELECT id FROM wake_attempts
             WHERE endpoint_id = ?1 AND state NOT IN ('released', 'delivery_unknown', 'consumed')
               AND (CASE WHEN app_binding_hash = ?2 THEN 1 ELSE 0 END) = ?3
             ORDER BY claimed_at, id",
        )?;
        let rows = stmt.query_map((endpoint, binding, i64::from(mine)), |r| r.get(0))?;
        rows.collect::<std::result::Result<_, _>>()?
    };
    ids.iter().map(|id| load_attempt(tx, id)).collect()
}

/// Settles the unresolved attempts through `endpoint` not of the fence hash `binding`: a claim
/// is released, an attempt past the fence becomes `delivery_unknown` (never re-sent).
fn settle_others(tx: &Tx<'_>, endpoint: &str, binding: &str, now: Timestamp) -> Result<Vec<WakeAttempt>> {
    let mut settled = Vec::new();
    for a in unresolved(tx, endpoint, binding, false)? {
        match a.state {
            AttemptState::Claimed => release(tx, &a.id, &a.wake_id, now)?,
            AttemptState::Dispatched | AttemptState::Accepted => mark_unknown(tx, &a, now)?,
            _ => continue,
        }
        settled.push(load_attempt(tx, &a.id)?);
    }
    Ok(settled)
}

/// Refuses a View that does not hold `ep`'s binding, or whose binding this host has not
/// registered since a restart (`wake_capable` cleared).
fn require_bound(tx: &Tx<'_>, ep: &Endpoint, binding: &str) -> Result<()> {
    let (held, _) = hashes_of(tx, &ep.id)?;
    if held.as_deref() != Some(binding) || !ep.wake_capable {
        return Err(Error::AppViewNotBound(ep.id.clone()));
    }
    Ok(())
}

/// Loads `attempt` if it is through `endpoint` and was claimed by the View of fence hash
/// `binding`; otherwise [`Error::AttemptNotFound`].
fn load_view_attempt(tx: &Tx<'_>, endpoint: &str, binding: &str, attempt: &str) -> Result<WakeAttempt> {
    let a = load_attempt_for(tx, endpoint, attempt)?;
    let claimed_by: Option<String> = tx
        .prepare_cached("SELECT app_binding_hash FROM wake_attempts WHERE id = ?1")?
        .query_row([attempt], |r| r.get(0))?;
    if claimed_by.as_deref() != Some(binding) {
        return Err(Error::AttemptNotFound(attempt.to_owned()));
    }
    Ok(a)
}

/// Whether `a` is an accepted attempt whose turn has not consumed its wake within
/// [`MAX_ACCEPTED_WAIT`].
fn accepted_lapsed(a: &WakeAttempt, now: Timestamp) -> bool {
    a.state == AttemptState::Accepted
        && a.finished_at
            .is_some_and(|at| now >= at.saturating_add(MAX_ACCEPTED_WAIT))
}

/// Whether a wake of `agent` waits to be claimed.
fn wake_pending(tx: &Tx<'_>, agent: &str) -> Result<bool> {
    Ok(tx
        .prepare_cached("SELECT 1 FROM wakes WHERE agent_id = ?1 AND state = 'pending'")?
        .exists([agent])?)
}

/// What the bound View's acquire answers when it needs no write — its own open attempt that
/// stays open, or idle — read in `tx`; `None` when it does: another View's attempt to settle, a
/// lapsed claim or accepted wait, a wake to claim.
fn acquire_without_writing(
    tx: &Tx<'_>,
    ep: &Endpoint,
    agent: &str,
    binding: &str,
    now: Timestamp,
) -> Result<Option<AppAcquire>> {
    if !unresolved(tx, &ep.id, binding, false)?.is_empty() {
        return Ok(None);
    }
    if let Some(attempt) = unresolved(tx, &ep.id, binding, true)?.pop() {
        let settles = match attempt.state {
            AttemptState::Claimed => now >= attempt.claim_expires_at,
            _ => accepted_lapsed(&attempt, now),
        };
        return Ok((!settles).then_some(AppAcquire::Open { attempt }));
    }
    let lapsed_claim = tx
        .prepare_cached(
            "SELECT 1 FROM wake_attempts WHERE agent_id = ?1 AND state = 'claimed' AND claim_expires_at <= ?2",
        )?
        .exists((agent, now.as_micros()))?;
    Ok((!lapsed_claim && !wake_pending(tx, agent)?).then_some(AppAcquire::Idle))
}

impl Store {
    /// Binds the acting endpoint to an MCP App View (see the [module docs](self)), renewing it
    /// by the lease it was attached with: the endpoint becomes wake-capable, carried by this
    /// host. The same fence again renews it, keeping its claim; a new fence binds only an
    /// endpoint no View holds (from the window recorded on it, if any) or, from the same
    /// window, replaces the View that holds it — and settles every earlier View's attempt.
    ///
    /// # Errors
    ///
    /// The endpoint admission errors (a host-held endpoint, a stale generation, an elapsed
    /// lease: a View binds only its own live endpoint); [`Error::AppViewConflict`] for a View
    /// of another window; [`Error::InvalidInput`] for a malformed fence or window;
    /// [`Error::MissingScope`]. A refusal changes nothing.
    pub fn bind_app_view(&mut self, caller: &Caller, actor: &AgentActor, view: &AppView<'_>) -> Result<AppBinding> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        let view = view.hashes()?;
        let host = self.host_id().to_owned();
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let ep = admit(&tx, caller, actor, now)?;
            let (held, window) = hashes_of(&tx, &ep.id)?;
            let same_window = window.is_some() && window == view.window;
            let outcome = match held {
                Some(h) if h == view.binding => AppBindOutcome::Renewed,
                None if window.is_none() || same_window => AppBindOutcome::Bound,
                Some(_) if same_window => AppBindOutcome::Rebound,
                _ => return Err(Error::AppViewConflict(ep.id)),
            };
            let settled = match outcome {
                AppBindOutcome::Renewed => Vec::new(),
                _ => settle_others(&tx, &ep.id, &view.binding, now)?,
            };
            let lease = attached_lease(&tx, &ep.id)?;
            tx.prepare_cached(
                "UPDATE agent_endpoints SET app_binding_hash = ?2, app_window_hash = coalesce(app_window_hash, ?3),
                        app_host_id = ?4, wake_capable = 1, lease_expires_at = ?5, updated_at = ?6
                 WHERE id = ?1",
            )?
            .execute((
                &ep.id,
                &view.binding,
                &view.window,
                &host,
                now.saturating_add(lease).as_micros(),
                now.as_micros(),
            ))?;
            if outcome != AppBindOutcome::Renewed {
                audit::record(
                    &tx,
                    AuditKind::AppViewBound,
                    Some(&actor.agent),
                    None,
                    json!({
                        "endpointId": ep.id,
                        "controllerGeneration": ep.generation,
                        "outcome": outcome,
                        "settledAttempts": settled.len(),
                    }),
                    now,
                )?;
            }
            let endpoint = load(&tx, &ep.id)?;
            tx.commit()?;
            Ok(AppBinding {
                endpoint,
                outcome,
                settled,
            })
        })
    }

    /// A View's heartbeat: which View holds the acting endpoint's binding, whether the asking
    /// View is of its window, the asking View's unresolved attempt, and whether a wake waits.
    /// When the asking View holds the binding, the lease is renewed by the lease it was
    /// attached with once less than half of it is left (as [`Store::touch_endpoint`]).
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::InvalidInput`]; [`Error::MissingScope`] without
    /// either communication scope.
    pub fn app_carrier_state(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        view: &AppView<'_>,
    ) -> Result<AppCarrierState> {
        if !caller.has(Scope::Manage) {
            caller.require(Scope::Read)?;
        }
        actor.validate()?;
        let view = view.hashes()?;
        self.admitted(|s| {
            // A read answers the heartbeat; the write lock is taken only when the lease is due.
            for write in [false, true] {
                let (tx, now) = if write { s.begin_immediate()? } else { s.begin_read()? };
                let mut ep = admit(&tx, caller, actor, now)?;
                let (held, window) = hashes_of(&tx, &ep.id)?;
                let holder = match held {
                    Some(h) if h == view.binding => AppBindingHolder::ThisView,
                    Some(_) => AppBindingHolder::OtherView,
                    None => AppBindingHolder::NoView,
                };
                if holder == AppBindingHolder::ThisView && renewal_due(&tx, &ep, now)?.is_some() {
                    if !write {
                        continue;
                    }
                    ep = renew_when_half_spent(&tx, ep, now)?;
                }
                let attempt = unresolved(&tx, &ep.id, &view.binding, true)?.pop();
                let wake_pending = wake_pending(&tx, &actor.agent)?;
                if write {
                    tx.commit()?;
                }
                return Ok(AppCarrierState {
                    endpoint: ep,
                    holder,
                    same_window: window.is_some() && window == view.window,
                    attempt,
                    wake_pending,
                });
            }
            unreachable!("the write pass returns")
        })
    }

    /// The View that holds the acting endpoint's binding acquires the agent's next wake: its
    /// own unresolved attempt if it has one ([`AppAcquire::Open`]: nothing new is claimed
    /// while it is — an accepted one for at most [`MAX_ACCEPTED_WAIT`], then it is settled
    /// `delivery_unknown`), else the pending wake, claimed for `claim_lease` through the same claim
    /// as the push carrier's. Attempts of earlier Views still unresolved are settled first, and
    /// expired claims released.
    ///
    /// # Errors
    ///
    /// [`Error::AppViewNotBound`] unless this View holds the binding (and this host registered
    /// it); the endpoint admission errors; [`Error::InvalidInput`] for a malformed fence or a
    /// claim lease outside [`MIN_CLAIM_LEASE`]..=[`MAX_CLAIM_LEASE`]; [`Error::MissingScope`].
    pub fn acquire_app_wake(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        view: &AppView<'_>,
        claim_lease: Duration,
    ) -> Result<AppAcquire> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        let view = view.hashes()?;
        bounds::lease("claimLease", claim_lease, MIN_CLAIM_LEASE, MAX_CLAIM_LEASE)?;
        self.admitted(|s| {
            // Most heartbeats find nothing to do: answered from a read, without the write lock.
            {
                let (tx, now) = s.begin_read()?;
                let ep = admit(&tx, caller, actor, now)?;
                require_bound(&tx, &ep, &view.binding)?;
                if let Some(answer) = acquire_without_writing(&tx, &ep, &actor.agent, &view.binding, now)? {
                    return Ok(answer);
                }
            }
            let (tx, now) = s.begin_immediate()?;
            let ep = admit(&tx, caller, actor, now)?;
            require_bound(&tx, &ep, &view.binding)?;
            settle_others(&tx, &ep.id, &view.binding, now)?;
            release_expired(&tx, Some(&actor.agent), now)?;
            if let Some(attempt) = unresolved(&tx, &ep.id, &view.binding, true)?.pop() {
                // An accepted turn that never consumed its wake within the wait is settled
                // unknown (never re-sent), so the agent's next wake can run.
                if !accepted_lapsed(&attempt, now) {
                    tx.commit()?;
                    return Ok(AppAcquire::Open { attempt });
                }
                mark_unknown(&tx, &attempt, now)?;
            }
            let found = match claim_in(&tx, caller, actor, claim_lease, Some(&view.binding), now)? {
                Some(claim) => AppAcquire::Claimed { claim },
                None => AppAcquire::Idle,
            };
            tx.commit()?;
            Ok(found)
        })
    }

    /// Crosses the durable dispatch fence for the View's claimed attempt, after checking in the
    /// same transaction that this exact View still holds the binding: call it immediately
    /// before the View asks the chat host to run the turn. Returns the consume token (for the
    /// View's automatic continuation message only). Never twice for one attempt.
    ///
    /// # Errors
    ///
    /// [`Error::AppViewNotBound`]; [`Error::AttemptNotFound`] for an attempt another View (or
    /// endpoint) claimed; [`Error::ClaimExpired`] if the claim lapsed (the wake is pending
    /// again); [`Error::InvalidAttemptState`] for an attempt not claimed (already past the
    /// fence: finish it as [`DispatchOutcome::Unknown`]); the endpoint admission errors;
    /// [`Error::InvalidInput`]; [`Error::MissingScope`].
    pub fn prepare_app_dispatch(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        view: &AppView<'_>,
        attempt: &str,
    ) -> Result<DispatchTicket> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        let view = view.hashes()?;
        check_attempt_id(attempt)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let ep = admit(&tx, caller, actor, now)?;
            require_bound(&tx, &ep, &view.binding)?;
            let a = load_view_attempt(&tx, &ep.id, &view.binding, attempt)?;
            prepare_in(tx, actor, a, now)
        })
    }

    /// Records what the View saw after the fence for its attempt: [`DispatchOutcome::Accepted`]
    /// (the chat host accepted the `ui/message`) or [`DispatchOutcome::Unknown`] (a timeout, an
    /// error, an envelope it could not use — anything that cannot prove the message was not
    /// delivered). The same outcome again, or any after the turn consumed the wake, is a no-op;
    /// accepted after `delivery_unknown` is refused.
    ///
    /// # Errors
    ///
    /// [`Error::AttemptNotFound`] for an attempt another View claimed;
    /// [`Error::InvalidAttemptState`]; the endpoint admission errors; [`Error::InvalidInput`];
    /// [`Error::MissingScope`].
    pub fn finish_app_dispatch(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        view: &AppView<'_>,
        attempt: &str,
        outcome: DispatchOutcome,
    ) -> Result<Mutation<WakeAttempt>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        let view = view.hashes()?;
        check_attempt_id(attempt)?;
        let event = outcome.event();
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let ep = admit(&tx, caller, actor, now)?;
            let a = load_view_attempt(&tx, &ep.id, &view.binding, attempt)?;
            let finished = finish(&tx, &actor.agent, a, event, now)?;
            if finished.state_changed {
                tx.commit()?;
            }
            Ok(finished)
        })
    }

    /// The View that holds the acting endpoint's binding lets it go: the endpoint stops being
    /// wake-capable, its claim is released, the window stays recorded (a View of that window may
    /// bind again) and a dispatched attempt stays consumable. Any other View's unbind is a
    /// no-op (`state_changed` false).
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::InvalidInput`]; [`Error::MissingScope`].
    pub fn unbind_app_view(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        view: &AppView<'_>,
    ) -> Result<Mutation<Endpoint>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        let view = view.hashes()?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let ep = admit(&tx, caller, actor, now)?;
            let (held, _) = hashes_of(&tx, &ep.id)?;
            if held.as_deref() != Some(view.binding.as_str()) {
                return Ok(Mutation::unchanged(ep));
            }
            tx.prepare_cached(
                "UPDATE agent_endpoints SET app_binding_hash = NULL, app_host_id = NULL, wake_capable = 0, updated_at = ?2
                 WHERE id = ?1",
            )?
            .execute((&ep.id, now.as_micros()))?;
            release_claims(&tx, &ep.id, now)?;
            audit::record(
                &tx,
                AuditKind::AppViewUnbound,
                Some(&actor.agent),
                None,
                json!({ "endpointId": ep.id, "controllerGeneration": ep.generation }),
                now,
            )?;
            let ep = load(&tx, &ep.id)?;
            tx.commit()?;
            Ok(Mutation::changed(ep))
        })
    }

    /// Replaces the caller's expired App-carried endpoint `endpoint` of `agent` at
    /// `generation` (the View's stale selector) by a successor one generation on, attached for
    /// the caller with the lease and window of the old one, in one transaction with the
    /// idempotency record that maps the old selector to it (see the [module docs](self)). The
    /// successor is not bound yet: the View binds it next. A live endpoint is a no-op
    /// ([`EndpointRecovery::Live`]); a retry after success returns the same successor
    /// (`replayed`) while it is the agent's current endpoint and holds the window.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] without a window (only a window's View may replace its
    /// endpoint) or for a malformed id, fence or window; [`Error::AgentNotFound`] /
    /// [`Error::EndpointNotFound`] outside the caller's reach; [`Error::TransferBoundAgent`];
    /// [`Error::EndpointNotCurrent`] for an endpoint detached or replaced (not expired);
    /// [`Error::StaleGeneration`] when `generation` is not the endpoint's, or a later endpoint
    /// already exists; [`Error::AppViewConflict`] for a window that is not the one recorded on
    /// it; [`Error::MissingScope`]. A refusal changes nothing.
    pub fn replace_expired_app_endpoint(
        &mut self,
        caller: &Caller,
        agent: &str,
        endpoint: &str,
        generation: u64,
        view: &AppView<'_>,
    ) -> Result<EndpointRecovery> {
        caller.require(Scope::Manage)?;
        check_agent_id(agent)?;
        check_endpoint_id(endpoint)?;
        let view = view.hashes()?;
        let Some(window) = view.window else {
            return Err(Error::invalid(
                "window",
                "the chat host gave no window key: only a View of the endpoint's window may replace it",
            ));
        };
        self.retrying(|s| {
            let (tx, now) = s.begin_immediate()?;
            let a = agent::load_owned(&tx, caller.principal(), agent)?;
            refuse_transfer_bound(&tx, caller, agent)?;
            let ep = load_scoped(&tx, caller, agent, endpoint)?;
            let stale = |current: u64| Error::StaleGeneration {
                endpoint: endpoint.to_owned(),
                given: generation,
                current,
            };
            let replaced: Option<String> = tx
                .prepare_cached(
                    "SELECT new_endpoint_id FROM app_endpoint_replacements
                     WHERE old_endpoint_id = ?1 AND principal = ?2 AND old_generation = ?3",
                )?
                .query_row((endpoint, caller.principal().as_str(), generation as i64), |r| r.get(0))
                .optional()?;
            if let Some(successor) = replaced {
                let next = load(&tx, &successor)?;
                let (_, next_window) = hashes_of(&tx, &successor)?;
                let current = next.state == EndpointState::Attached && next.generation == a.controller_generation;
                if !current || next_window.as_deref() != Some(window.as_str()) {
                    return Err(stale(a.controller_generation));
                }
                return Ok(EndpointRecovery::Replaced {
                    expired: ep,
                    successor: next,
                    replayed: true,
                });
            }
            if ep.generation != generation {
                return Err(stale(ep.generation));
            }
            if ep.is_live(now) {
                return Ok(EndpointRecovery::Live { endpoint: ep });
            }
            if !matches!(ep.state, EndpointState::Attached | EndpointState::Expired) {
                return Err(Error::EndpointNotCurrent {
                    endpoint: ep.id,
                    state: ep.state,
                });
            }
            let (_, recorded) = hashes_of(&tx, &ep.id)?;
            if recorded.as_deref() != Some(window.as_str()) {
                return Err(Error::AppViewConflict(ep.id));
            }
            if a.controller_generation != ep.generation {
                return Err(stale(a.controller_generation));
            }
            retire(&tx, &ep.id, EndpointState::Expired, now)?;
            let lease = attached_lease(&tx, &ep.id)?;
            let successor = attach(&tx, caller.principal(), &a, lease, caller.kind(), now)?;
            tx.prepare_cached("UPDATE agent_endpoints SET app_window_hash = ?2 WHERE id = ?1")?
                .execute((&successor.id, &window))?;
            tx.prepare_cached("UPDATE agent_endpoints SET app_window_hash = NULL WHERE id = ?1")?
                .execute([&ep.id])?;
            tx.prepare_cached(
                "INSERT INTO app_endpoint_replacements
                   (old_endpoint_id, principal, agent_id, old_generation, new_endpoint_id, new_generation, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute((
                &ep.id,
                caller.principal().as_str(),
                agent,
                ep.generation as i64,
                &successor.id,
                successor.generation as i64,
                now.as_micros(),
            ))?;
            audit::record(
                &tx,
                AuditKind::AppEndpointReplaced,
                Some(agent),
                None,
                json!({
                    "endpointId": ep.id,
                    "controllerGeneration": ep.generation,
                    "successorEndpointId": successor.id,
                    "successorGeneration": successor.generation,
                }),
                now,
            )?;
            let expired = load(&tx, &ep.id)?;
            let successor = load(&tx, &successor.id)?;
            tx.commit()?;
            Ok(EndpointRecovery::Replaced {
                expired,
                successor,
                replayed: false,
            })
        })
    }
}
