//! Several hosts on one database: which `ahp serve` processes are live, until when, and which
//! agents each one carries.
//!
//! A host joins under its id ([`Store::join_host`]) with the next *incarnation* and a lease it
//! renews ([`Store::renew_host_lease`]); every transfer records the host that carries its agent
//! (`transfers.host_id`: the host that began its activation, then whoever took it over or
//! received it in a move), and every endpoint a binding attaches records the host that attached
//! it. The endpoint's controller generation is the fencing token: whatever a host does for an
//! agent goes through the exact endpoint and generation it bound, so once another host has
//! bound the agent again (generation + 1) a stale host's claims, turn ends and posts are
//! refused by the store, whatever that host believes.
//!
//! A host whose lease has lapsed (by this store's clock, which on PostgreSQL follows the
//! database's: [`Store::sync_database_clock`]) or that stopped cleanly is claimed by any live
//! host ([`Store::claim_lapsed_hosts`], in slices that each check the claimant's own lease:
//! [`claim`]): the activations it had begun fail as interrupted (the orchestrator retries with
//! a new token), its model calls in flight are charged in full (as after a restart), its
//! endpoints are retired as expired (claims not past the dispatch fence go back to pending,
//! dispatched turns become `delivery_unknown`: never run twice), and its agents' transfers are
//! now carried by the claimant, their agents bound there at the next generation and resumed
//! from their checkpoints at their next wake. A host that rejoins (a restart) does the same to
//! its own previous incarnation.

use std::time::Duration;

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;

use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::input::{MAX_LIST_LIMIT, check_transfer_id};

pub mod claim;

pub use claim::{CLAIM_SLICE, HostClaim, INTERRUPTED_BY_HOST_LOSS};

pub use crate::db::DEFAULT_HOST_ID;

/// Longest host id, in characters.
pub const MAX_HOST_ID_CHARS: usize = 64;

/// Shortest host lease: a renewal must fit well inside it, database round trip included.
pub const MIN_HOST_LEASE: Duration = Duration::from_secs(1);

/// Longest host lease: a dead host's agents wait at most this long for a survivor.
pub const MAX_HOST_LEASE: Duration = Duration::from_secs(600);

/// Most hosts [`Store::hosts`] lists (and most hosts one database may hold).
pub const MAX_HOSTS: usize = 1000;

/// Checks a host id: 1 to [`MAX_HOST_ID_CHARS`] ASCII letters, digits, `.`, `_` or `-`,
/// starting with a letter or digit (it appears in logs, URLs and the console unescaped).
///
/// # Errors
///
/// [`Error::InvalidInput`] naming the rule it broke.
pub fn validate_host_id(id: &str) -> Result<()> {
    let ok_chars = id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if id.is_empty() || id.len() > MAX_HOST_ID_CHARS {
        return Err(Error::invalid(
            "hostId",
            format!("must be 1 to {MAX_HOST_ID_CHARS} characters"),
        ));
    }
    if !ok_chars || !id.as_bytes()[0].is_ascii_alphanumeric() {
        return Err(Error::invalid(
            "hostId",
            "must be ASCII letters, digits, '.', '_' or '-', starting with a letter or digit",
        ));
    }
    Ok(())
}

fn check_lease(lease: Duration) -> Result<()> {
    if !(MIN_HOST_LEASE..=MAX_HOST_LEASE).contains(&lease) {
        return Err(Error::invalid(
            "hostLease",
            format!("must be {MIN_HOST_LEASE:?} to {MAX_HOST_LEASE:?}"),
        ));
    }
    Ok(())
}

/// Where a host stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostState {
    /// Serving, as long as its lease holds.
    Live,
    /// Stopped cleanly; its agents are claimable at once.
    Stopped,
    /// Its agents were claimed by another host ([`Host::claimed_by`]).
    Expired,
}

impl HostState {
    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "live" => Self::Live,
            "stopped" => Self::Stopped,
            "expired" => Self::Expired,
            other => return Err(Error::corrupt("hosts", format!("unknown state {other:?}"))),
        })
    }
}

/// One host of the database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Host {
    /// Its id (`--host-id`).
    pub id: String,
    /// How many times a host of this id has joined; the current process is the last.
    pub incarnation: u64,
    /// Where it stands.
    pub state: HostState,
    /// The HTTP address it serves at, if it does.
    pub address: Option<String>,
    /// When its lease runs out unless renewed.
    pub lease_expires_at: Timestamp,
    /// When this incarnation joined.
    pub joined_at: Timestamp,
    /// When its lease was last renewed.
    pub renewed_at: Timestamp,
    /// The host that claimed its agents, once [`HostState::Expired`].
    pub claimed_by: Option<String>,
}

impl Host {
    /// Whether its lease holds at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.state == HostState::Live && self.lease_expires_at > now
    }
}

const HOST_COLUMNS: &str = "id, incarnation, state, address, lease_expires_at, joined_at, renewed_at, claimed_by";

fn host_from_row(r: &Row) -> ahp_store_sql::SqlResult<Result<Host>> {
    let incarnation: i64 = r.get(1)?;
    let state: String = r.get(2)?;
    Ok((|| {
        Ok(Host {
            id: r.get(0)?,
            incarnation: u64::try_from(incarnation)
                .map_err(|_| Error::corrupt("hosts", format!("negative incarnation {incarnation}")))?,
            state: HostState::parse(&state)?,
            address: r.get(3)?,
            lease_expires_at: Timestamp::from_micros(r.get(4)?),
            joined_at: Timestamp::from_micros(r.get(5)?),
            renewed_at: Timestamp::from_micros(r.get(6)?),
            claimed_by: r.get(7)?,
        })
    })())
}

fn load(tx: &Tx<'_>, id: &str) -> Result<Option<Host>> {
    let sql = format!("SELECT {HOST_COLUMNS} FROM hosts WHERE id = ?1");
    tx.prepare_cached(&sql)?
        .query_row([id], host_from_row)
        .optional()?
        .transpose()
}

/// The lease this process holds as a host: what it renews and what fences its claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostLease {
    /// The host id.
    pub host: String,
    /// This process's incarnation of it.
    pub incarnation: u64,
    /// When the lease runs out unless renewed (by the store's clock).
    pub expires_at: Timestamp,
}

/// Refuses unless `lease` is still this host's live, unexpired lease at `now`.
pub(crate) fn check_holds(tx: &Tx<'_>, lease: &HostLease, now: Timestamp) -> Result<Host> {
    let lost = |why: String| Error::HostLeaseLost {
        host: lease.host.clone(),
        why,
    };
    let Some(h) = load(tx, &lease.host)? else {
        return Err(lost("no such host".into()));
    };
    if h.incarnation != lease.incarnation {
        return Err(lost(format!(
            "incarnation {} joined after this one ({})",
            h.incarnation, lease.incarnation
        )));
    }
    match h.state {
        HostState::Live if h.lease_expires_at > now => Ok(h),
        HostState::Live => Err(lost(format!("its lease ran out at {}", h.lease_expires_at))),
        HostState::Stopped => Err(lost("it stopped".into())),
        HostState::Expired => Err(lost(format!(
            "its agents were claimed by {}",
            h.claimed_by.as_deref().unwrap_or("another host")
        ))),
    }
}

impl Store {
    /// The host this store acts as ([`DEFAULT_HOST_ID`] unless [`with_host_id`](Self::with_host_id)).
    pub fn host_id(&self) -> &str {
        &self.host_id
    }

    /// Acts as host `id` from now on: the host recorded on the transfers it activates and the
    /// endpoints it binds, and whose agents it carries.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an id [`validate_host_id`] refuses.
    pub fn with_host_id(mut self, id: &str) -> Result<Self> {
        validate_host_id(id)?;
        self.host_id = id.to_owned();
        Ok(self)
    }

    /// Joins the database as this store's host with the next incarnation and a lease of
    /// `lease`, serving at `address` (shown to operators). What a previous incarnation left
    /// behind is claimed back by [`claim_own_leftovers`](Self::claim_own_leftovers).
    ///
    /// Refused while the host id's current incarnation still holds an unexpired lease: another
    /// process serves as this host (two `ahp serve` on one machine under its default host id,
    /// containers with one fixed host name), and joining would fence it out, whose own rejoin
    /// would fence this one, in a loop. [`take_over_host`](Self::take_over_host) fences it out
    /// deliberately.
    ///
    /// # Errors
    ///
    /// [`Error::HostInUse`] (naming the other process's address, if it serves one) while the
    /// current incarnation's lease holds; [`Error::InvalidInput`] for a lease outside
    /// [`MIN_HOST_LEASE`]..=[`MAX_HOST_LEASE`] or an address over 256 bytes;
    /// [`Error::InvalidInput`] too when the database already holds [`MAX_HOSTS`] hosts. A
    /// refusal changes nothing.
    pub fn join_host(&mut self, lease: Duration, address: Option<&str>) -> Result<HostLease> {
        self.join_as_host(lease, address, false)
    }

    /// Joins as [`join_host`](Self::join_host) does, whatever the host id's current incarnation
    /// holds: a process still running as it is fenced out (its next renewal fails, and the
    /// store refuses its writes for the agents it carried). For a database only this process
    /// can serve (SQLite behind the data directory's lock), and for an operator who knows the
    /// other process is gone (`ahp serve --take-over`).
    ///
    /// # Errors
    ///
    /// As [`join_host`](Self::join_host), without [`Error::HostInUse`].
    pub fn take_over_host(&mut self, lease: Duration, address: Option<&str>) -> Result<HostLease> {
        self.join_as_host(lease, address, true)
    }

    fn join_as_host(&mut self, lease: Duration, address: Option<&str>, take_over: bool) -> Result<HostLease> {
        check_lease(lease)?;
        if address.is_some_and(|a| a.is_empty() || a.len() > 256) {
            return Err(Error::invalid("address", "must be 1 to 256 bytes"));
        }
        let me = self.host_id.clone();
        self.write_at(|tx, now| {
            let expires_at = now.saturating_add(lease);
            let previous = load(tx, &me)?;
            let incarnation = match &previous {
                Some(h) if !take_over && h.is_live(now) => {
                    return Err(Error::HostInUse {
                        host: h.id.clone(),
                        incarnation: h.incarnation,
                        address: h.address.clone(),
                        until: h.lease_expires_at,
                    });
                }
                Some(h) => {
                    let next = h.incarnation + 1;
                    tx.prepare_cached(
                        "UPDATE hosts SET incarnation = ?2, state = 'live', address = ?3, lease_expires_at = ?4,
                                          joined_at = ?5, renewed_at = ?5, claimed_by = NULL
                         WHERE id = ?1",
                    )?
                    .execute((
                        &me,
                        next as i64,
                        address,
                        expires_at.as_micros(),
                        now.as_micros(),
                    ))?;
                    next
                }
                None => {
                    let hosts: i64 = tx.query_row("SELECT count(*) FROM hosts", [], |r| r.get(0))?;
                    if hosts as usize >= MAX_HOSTS {
                        return Err(Error::invalid(
                            "hostId",
                            format!("the database already holds {MAX_HOSTS} hosts"),
                        ));
                    }
                    tx.prepare_cached(
                        "INSERT INTO hosts (id, incarnation, state, address, lease_expires_at, joined_at, renewed_at)
                         VALUES (?1, 1, 'live', ?2, ?3, ?4, ?4)",
                    )?
                    .execute((&me, address, expires_at.as_micros(), now.as_micros()))?;
                    1
                }
            };
            Ok(HostLease {
                host: me.clone(),
                incarnation,
                expires_at,
            })
        })
    }

    /// Renews `lease` for `length` more from now.
    ///
    /// # Errors
    ///
    /// [`Error::HostLeaseLost`] (saying why) if the lease already ran out, another host claimed
    /// this host's agents, it stopped, or a newer incarnation joined: the caller must stop
    /// every sandbox it runs, since another host may be running its agents now.
    pub fn renew_host_lease(&mut self, lease: &HostLease, length: Duration) -> Result<HostLease> {
        check_lease(length)?;
        self.write_at(|tx, now| {
            check_holds(tx, lease, now)?;
            let expires_at = now.saturating_add(length);
            tx.prepare_cached("UPDATE hosts SET lease_expires_at = ?2, renewed_at = ?3 WHERE id = ?1")?
                .execute((&lease.host, expires_at.as_micros(), now.as_micros()))?;
            Ok(HostLease {
                expires_at,
                ..lease.clone()
            })
        })
    }

    /// Leaves cleanly: the host is `stopped` and its agents are claimable at once. A lease
    /// already lost is not an error (there is nothing left to give up).
    ///
    /// # Errors
    ///
    /// Only a database failure.
    pub fn leave_host(&mut self, lease: &HostLease) -> Result<()> {
        self.write_at(|tx, now| match check_holds(tx, lease, now) {
            Ok(_) => {
                tx.prepare_cached(
                    "UPDATE hosts SET state = 'stopped', lease_expires_at = ?2, renewed_at = ?2 WHERE id = ?1",
                )?
                .execute((&lease.host, now.as_micros()))?;
                Ok(())
            }
            Err(Error::HostLeaseLost { .. }) => Ok(()),
            Err(e) => Err(e),
        })
    }

    /// Every host of the database, by id.
    ///
    /// # Errors
    ///
    /// A database failure or a row this build cannot read.
    pub fn hosts(&mut self) -> Result<Vec<Host>> {
        let sql = format!("SELECT {HOST_COLUMNS} FROM hosts ORDER BY id LIMIT {MAX_HOSTS}");
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map([], host_from_row)?;
        rows.map(|r| r?).collect()
    }

    /// Adopts every agent of the database for this host, whatever host carried it: for a
    /// database only one process serves (SQLite, which `ahp serve` guards with a lock file), so
    /// every other host recorded in it is gone. Transfers without a host (written before hosts
    /// were recorded) are adopted too. Returns how many transfers changed host. Run it before
    /// the takeover reconciliation, which then treats them as this host's own.
    ///
    /// # Errors
    ///
    /// A database failure (nothing changed then).
    pub fn adopt_all_hosts(&mut self) -> Result<u64> {
        let me = self.host_id.clone();
        self.write_at(|tx, now| {
            tx.prepare_cached(
                "UPDATE hosts SET state = 'expired', claimed_by = ?1 WHERE id <> ?1 AND state <> 'expired'",
            )?
            .execute([&me])?;
            tx.prepare_cached(
                "UPDATE agent_endpoints SET host_id = ?1
                 WHERE host_held = 1 AND state = 'attached' AND (host_id IS NULL OR host_id <> ?1)",
            )?
            .execute([&me])?;
            let moved = tx
                .prepare_cached(
                    "UPDATE transfers SET host_id = ?1, updated_at = ?2
                     WHERE (host_id IS NULL OR host_id <> ?1) AND status NOT IN ('terminated', 'expired')",
                )?
                .execute((&me, now.as_micros()))?;
            tx.execute("DELETE FROM agent_moves", [])?;
            Ok(moved as u64)
        })
    }

    /// The `active` transfers bound to an agent that this host carries, by transfer id after
    /// the exclusive cursor `after`, at most `limit`: what a host binds after a claim.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed cursor or a limit outside 1..=[`MAX_LIST_LIMIT`].
    #[cfg(any(test, feature = "testing"))]
    pub fn carried_transfers(&mut self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        if limit == 0 || limit > MAX_LIST_LIMIT {
            return Err(Error::invalid("limit", format!("must be 1 to {MAX_LIST_LIMIT}")));
        }
        if let Some(a) = after {
            check_transfer_id(a)?;
        }
        let me = self.host_id.clone();
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(
            "SELECT id FROM transfers
             WHERE host_id = ?1 AND status = 'active' AND agent_id IS NOT NULL AND id > ?2 ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt.query_map((&me, after.unwrap_or(""), limit as i64), |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Transfers [`Store::active_among`] reads per statement (the rest of its `IN` list padded).
const ACTIVE_AMONG_BATCH: usize = 100;

impl Store {
    /// Which of `transfers` are `active`, in the order given: what a host's sweep asks of
    /// every transfer it carries, one statement per hundred instead of one read each. An id no
    /// transfer has is not active.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for more than [`MAX_LIST_LIMIT`] ids or a malformed one.
    pub fn active_among(&mut self, transfers: &[String]) -> Result<Vec<String>> {
        if transfers.len() > MAX_LIST_LIMIT {
            return Err(Error::invalid("transfers", format!("at most {MAX_LIST_LIMIT} at once")));
        }
        for t in transfers {
            check_transfer_id(t)?;
        }
        let placeholders: Vec<String> = (1..=ACTIVE_AMONG_BATCH).map(|i| format!("?{i}")).collect();
        // By primary key only: a `status` condition would let a planner scan every active
        // transfer through the status index instead.
        let sql = format!(
            "SELECT id, status FROM transfers WHERE id IN ({})",
            placeholders.join(", ")
        );
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(&sql)?;
        let mut active = std::collections::HashSet::new();
        for batch in transfers.chunks(ACTIVE_AMONG_BATCH) {
            let mut params: Vec<&str> = batch.iter().map(String::as_str).collect();
            params.resize(ACTIVE_AMONG_BATCH, "");
            for row in stmt.query_map(params, |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
                let (id, status) = row?;
                if status == "active" {
                    active.insert(id);
                }
            }
        }
        Ok(transfers.iter().filter(|t| active.contains(*t)).cloned().collect())
    }
}

/// Refuses a write for `transfer` unless this host carries it (or nobody does yet): a host that
/// lost an agent to another (a takeover, a move) must not overwrite its state.
pub(crate) fn check_carries(tx: &Tx<'_>, transfer: &str, me: &str) -> Result<()> {
    let carrier: Option<Option<String>> = tx
        .prepare_cached("SELECT host_id FROM transfers WHERE id = ?1")?
        .query_row([transfer], |r| r.get(0))
        .optional()?;
    match carrier {
        None => Err(Error::TransferNotFound(transfer.to_owned())),
        Some(Some(h)) if h != me => Err(Error::CarriedElsewhere {
            transfer: transfer.to_owned(),
            host: h,
        }),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests;
