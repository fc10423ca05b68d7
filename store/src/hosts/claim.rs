//! Claiming the agents of a host that is gone: in slices, each its own transaction that
//! re-checks the claimant's lease, binding each agent here as it moves.
//!
//! A claim begins with one short transaction that marks the lapsed host `expired` (claimed by
//! this one), fails the activations it had begun as interrupted, charges its model calls in
//! flight their reservations and drops the moves towards or away from it. Its transfers then
//! move here [`CLAIM_SLICE`] at a time, in transfer id order, each slice one transaction that
//! first checks again that the claimant's lease holds and that the claimed host is still
//! `expired` (it may have joined again: what it still carries is then its own). In its slice an
//! agent's endpoints on the claimed host are retired as expired (claims not past the dispatch
//! fence go back to pending, dispatched turns become `delivery_unknown`: never run twice) and
//! the agent is bound here at the next controller generation — a wake carrier again if it was
//! one — *parked*: no sandbox, no commit of its own, until its next wake reads it from the
//! store. The agents the claim cannot carry on that way (a transfer with no agent yet, an
//! agent with no wake-capable endpoint to carry on) are listed for the claimant to bind
//! itself ([`HostClaim::unbound`]). Last, the claimed host's remaining attached endpoints are
//! retired, a slice at a time.
//!
//! So the claimant's own lease renewal waits behind one slice at most, never behind the
//! whole claim, and a claim costs a few statements per agent, not two commits. A claimant
//! that dies half-way leaves an `expired` host that still carries transfers: the next claim of
//! any live host finishes it ([`Store::claim_lapsed_hosts`]'s safety net). A host that rejoins
//! claims back its own previous incarnation the same way ([`Store::claim_own_leftovers`]).

use std::time::Duration;

use ahp_store_sql::Tx;
use serde::Serialize;

use super::{HostLease, HostState, check_holds, load};
use crate::clock::Timestamp;
use crate::conversation::EndpointState;
use crate::conversation::bounds::{self, MAX_ENDPOINT_LEASE, MIN_ENDPOINT_LEASE};
use crate::conversation::{attachment, endpoint};
use crate::db::Store;
use crate::error::Result;

/// Transfers one slice of a claim moves (and endpoints one slice retires), in one
/// transaction: what the claimant's own lease renewal may wait behind.
pub const CLAIM_SLICE: usize = 128;

/// What claiming a host's agents did ([`Store::claim_lapsed_hosts`], and a rejoining host's own
/// previous incarnation in [`Store::claim_own_leftovers`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostClaim {
    /// The host whose agents were claimed.
    pub host: String,
    /// The active (or insolvent) transfers now carried by the claimant.
    pub transfers: Vec<String>,
    /// How many of their agents the claim bound here at the next generation, parked until
    /// their next wake.
    pub parked: u64,
    /// The active transfers the claim did not bind (no agent yet, or no wake-capable endpoint
    /// to carry on): the claimant binds them.
    pub unbound: Vec<String>,
    /// Activations the host had begun, failed as interrupted.
    pub interrupted: Vec<String>,
    /// Its model calls in flight, charged their reservations.
    pub settled_calls: Vec<String>,
    /// Its endpoints retired as expired (their wake attempts reconciled).
    pub retired_endpoints: u64,
    /// The transactions the claim took (one to begin, then its slices).
    pub slices: u64,
}

/// What an interrupted activation records as its reason when its host is claimed.
pub const INTERRUPTED_BY_HOST_LOSS: &str =
    "interrupted: the host running the activation stopped or lost its lease; retry with a new token";

/// How a claim of `from` begins: what the first transaction checks and marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Begin {
    /// A host whose lease lapsed or that stopped: marked `expired`, claimed by the claimant.
    Lapsed,
    /// An `expired` host that still carries transfers (a claim left half-way).
    Stranded,
    /// The claimant's own previous incarnation.
    Own,
}

/// Begins the claim of `from` for `to` inside `tx` (see the [module docs](self)); `None` if
/// there is nothing to claim (the host is live again, or already claimed).
fn begin_in(tx: &Tx<'_>, from: &str, to: &str, how: Begin, now: Timestamp) -> Result<Option<HostClaim>> {
    match how {
        Begin::Own => {}
        Begin::Lapsed => {
            let Some(h) = load(tx, from)? else { return Ok(None) };
            let lapsed = match h.state {
                HostState::Live => h.lease_expires_at <= now,
                HostState::Stopped => true,
                HostState::Expired => false,
            };
            if !lapsed {
                return Ok(None);
            }
            tx.prepare_cached("UPDATE hosts SET state = 'expired', claimed_by = ?2 WHERE id = ?1")?
                .execute((from, to))?;
        }
        Begin::Stranded => {
            if !finishable(tx, from, to, now)? {
                return Ok(None);
            }
        }
    }
    let interrupted = crate::lifecycle::fail_interrupted_in(tx, Some(from), INTERRUPTED_BY_HOST_LOSS, now)?;
    let settled_calls = crate::model_call::settle_interrupted_in(tx, Some(from), now)?;
    if from != to {
        // A move towards or away from the claimed host is moot now (one handed over to it
        // already names it as the carrier: its transfer is claimed with the others).
        tx.prepare_cached("DELETE FROM agent_moves WHERE (from_host = ?1 OR to_host = ?1) AND handed_over_at IS NULL")?
            .execute([from])?;
    }
    Ok(Some(HostClaim {
        host: from.to_owned(),
        interrupted,
        settled_calls,
        slices: 1,
        ..HostClaim::default()
    }))
}

/// Whether `from` is still `expired` (it has not joined again since).
fn still_expired(tx: &Tx<'_>, from: &str) -> Result<bool> {
    Ok(load(tx, from)?.is_some_and(|h| h.state == HostState::Expired))
}

/// Whether `to` may finish the claim of `from`: `from` is still `expired`, and the host that
/// claimed it is `to` itself or no longer live (a live claimant finishes its own claim).
fn finishable(tx: &Tx<'_>, from: &str, to: &str, now: Timestamp) -> Result<bool> {
    let Some(h) = load(tx, from)? else { return Ok(false) };
    if h.state != HostState::Expired {
        return Ok(false);
    }
    match h.claimed_by.as_deref() {
        None => Ok(true),
        Some(claimant) if claimant == to => Ok(true),
        Some(claimant) => Ok(!load(tx, claimant)?.is_some_and(|c| c.is_live(now))),
    }
}

/// Moves the next [`CLAIM_SLICE`] transfers of `from` after `after` to `to` inside `tx`,
/// retiring their agents' endpoints on `from` and binding each agent here (see the
/// [module docs](self)); adds what it did to `claim`. Returns the last transfer of the
/// slice, `None` once no transfer is left.
fn transfers_slice_in(
    tx: &Tx<'_>,
    from: &str,
    to: &str,
    after: &str,
    carrier_lease: Duration,
    claim: &mut HostClaim,
    now: Timestamp,
) -> Result<Option<String>> {
    let slice: Vec<(String, String, Option<String>)> = {
        let mut stmt = tx.prepare_cached(
            "SELECT id, status, agent_id FROM transfers
             WHERE host_id = ?1 AND status IN ('active', 'insolvent') AND id > ?2 ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt.query_map((from, after, CLAIM_SLICE as i64), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    let Some((last, _, _)) = slice.last() else {
        return Ok(None);
    };
    let last = last.clone();
    for (transfer, status, agent) in slice {
        // By compare-and-set: another claimant finishing the same stranded host took it.
        let moved = tx
            .prepare_cached("UPDATE transfers SET host_id = ?3, updated_at = ?4 WHERE id = ?1 AND host_id = ?2")?
            .execute((&transfer, from, to, now.as_micros()))?;
        if moved != 1 {
            continue;
        }
        claim.transfers.push(transfer.clone());
        let mut carried_wakes = false;
        if let Some(agent) = &agent {
            let endpoints: Vec<(String, bool)> = {
                let mut stmt = tx.prepare_cached(
                    "SELECT id, wake_capable FROM agent_endpoints
                     WHERE agent_id = ?1 AND host_id = ?2 AND state = 'attached' ORDER BY id",
                )?;
                let rows = stmt.query_map((agent, from), |r| Ok((r.get(0)?, r.get::<_, i64>(1)? == 1)))?;
                rows.collect::<Result<_, _>>()?
            };
            for (ep, wake_capable) in endpoints {
                carried_wakes |= wake_capable;
                if attachment::retire(tx, &ep, EndpointState::Expired, now)? {
                    claim.retired_endpoints += 1;
                }
            }
        }
        if status != "active" {
            continue;
        }
        if agent.is_none() || !carried_wakes {
            claim.unbound.push(transfer);
            continue;
        }
        let binding = crate::binding::bind_in(tx, to, &transfer, carrier_lease, now)?;
        endpoint::mark_wake_capable(tx, &binding.endpoint.id, now)?;
        claim.parked += 1;
    }
    Ok(Some(last))
}

/// Retires, inside `tx`, up to [`CLAIM_SLICE`] endpoints still attached on `from` whose agent
/// `to` does not carry on as an active transfer (what the transfers' slices left: the
/// endpoints of agents whose transfers ended). Returns how many.
fn endpoints_slice_in(tx: &Tx<'_>, from: &str, to: &str, now: Timestamp) -> Result<u64> {
    let endpoints: Vec<String> = {
        let mut stmt = tx.prepare_cached(
            "SELECT e.id FROM agent_endpoints e
             WHERE e.host_id = ?1 AND e.state = 'attached'
               AND NOT EXISTS (SELECT 1 FROM transfers t
                               WHERE t.agent_id = e.agent_id AND t.host_id = ?2 AND t.status = 'active')
             ORDER BY e.id LIMIT ?3",
        )?;
        let rows = stmt.query_map((from, to, CLAIM_SLICE as i64), |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut retired = 0;
    for ep in &endpoints {
        if attachment::retire(tx, ep, EndpointState::Expired, now)? {
            retired += 1;
        }
    }
    Ok(retired)
}

impl Store {
    /// Claims back what a previous incarnation of this host left (a crash, a restart), as a
    /// claim of a lapsed host does (see the [module docs](self)), the transfers staying this
    /// host's and their agents bound again at the next generation with endpoint leases of
    /// `carrier_lease`. Running it again is harmless (each run binds again).
    ///
    /// # Errors
    ///
    /// [`Error::HostLeaseLost`](crate::Error::HostLeaseLost) if `lease` no longer holds (the slices already done stay
    /// done); [`Error::InvalidInput`](crate::Error::InvalidInput) for a `carrier_lease` outside the endpoint lease bounds;
    /// a database failure.
    pub fn claim_own_leftovers(&mut self, lease: &HostLease, carrier_lease: Duration) -> Result<HostClaim> {
        let me = lease.host.clone();
        Ok(self
            .claim_host(lease, &me, Begin::Own, carrier_lease)?
            .unwrap_or_else(|| HostClaim {
                host: me,
                ..HostClaim::default()
            }))
    }

    /// Claims the agents of every other host whose lease has lapsed or that stopped (see the
    /// [module docs](self)), each claim's transactions checking that `lease` still holds (a
    /// host that lost its own lease claims nothing more). Two hosts claiming the same one at
    /// once: one claims it, the other finds it claimed. Then, as a safety net, it finishes the
    /// claim of every `expired` host that an `active` or `insolvent` transfer still names as
    /// its carrier, unless another live host claimed it (that one finishes its own claim): a
    /// claimant died half-way, or a move was handed over to a host already claimed; nobody
    /// else would ever bind them. The
    /// agents are bound here with endpoint leases of `carrier_lease`. Returns what each claim
    /// did; the caller binds [`HostClaim::unbound`].
    ///
    /// # Errors
    ///
    /// [`Error::HostLeaseLost`](crate::Error::HostLeaseLost) if this host's own lease no longer holds;
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a `carrier_lease` outside the endpoint lease bounds; a
    /// database failure (the slices already done stay done).
    pub fn claim_lapsed_hosts(&mut self, lease: &HostLease, carrier_lease: Duration) -> Result<Vec<HostClaim>> {
        bounds::lease("carrier_lease", carrier_lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
        let now = self.now();
        let candidates: Vec<String> = {
            let tx = self.autocommit();
            check_holds(&tx, lease, now)?;
            let mut stmt = tx.prepare_cached(
                "SELECT id FROM hosts
                 WHERE id <> ?1 AND ((state = 'live' AND lease_expires_at <= ?2) OR state = 'stopped')
                 ORDER BY id",
            )?;
            let rows = stmt.query_map((&lease.host, now.as_micros()), |r| r.get(0))?;
            rows.collect::<Result<_, _>>()?
        };
        let mut claims = Vec::new();
        for host in candidates {
            claims.extend(self.claim_host(lease, &host, Begin::Lapsed, carrier_lease)?);
        }
        let stranded: Vec<String> = {
            let tx = self.autocommit();
            let mut stmt = tx.prepare_cached(
                "SELECT h.id FROM hosts h
                 WHERE h.state = 'expired' AND h.id <> ?1
                   AND EXISTS (SELECT 1 FROM transfers t
                               WHERE t.host_id = h.id AND t.status IN ('active', 'insolvent'))
                 ORDER BY h.id",
            )?;
            let rows = stmt.query_map([&lease.host], |r| r.get(0))?;
            rows.collect::<Result<_, _>>()?
        };
        for host in stranded {
            let claim = self.claim_host(lease, &host, Begin::Stranded, carrier_lease)?;
            claims.extend(claim.filter(|c| !c.transfers.is_empty()));
        }
        Ok(claims)
    }

    /// One claim of `from` for `lease`'s host, begun as `how`, in slices (see the
    /// [module docs](self)); `None` if there was nothing to claim.
    fn claim_host(
        &mut self,
        lease: &HostLease,
        from: &str,
        how: Begin,
        carrier_lease: Duration,
    ) -> Result<Option<HostClaim>> {
        bounds::lease("carrier_lease", carrier_lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
        let to = lease.host.as_str();
        let Some(mut claim) = self.write_at(|tx, now| {
            check_holds(tx, lease, now)?;
            begin_in(tx, from, to, how, now)
        })?
        else {
            return Ok(None);
        };
        // Each slice checks again that this host still holds its lease and that the claimed
        // host has not joined again (what it still carries is then its own).
        let still_claimable = |tx: &Tx<'_>, now| -> Result<bool> {
            check_holds(tx, lease, now)?;
            Ok(how == Begin::Own || still_expired(tx, from)?)
        };
        let mut after = String::new();
        loop {
            let before = claim.clone();
            let next = self.write_at(|tx, now| {
                claim = before.clone();
                claim.slices += 1;
                if !still_claimable(tx, now)? {
                    return Ok(None);
                }
                transfers_slice_in(tx, from, to, &after, carrier_lease, &mut claim, now)
            })?;
            match next {
                Some(last) => after = last,
                None => break,
            }
        }
        loop {
            let retired = self.write_at(|tx, now| {
                if !still_claimable(tx, now)? {
                    return Ok(0);
                }
                endpoints_slice_in(tx, from, to, now)
            })?;
            claim.slices += 1;
            claim.retired_endpoints += retired;
            if retired < CLAIM_SLICE as u64 {
                break;
            }
        }
        Ok(Some(claim))
    }
}
