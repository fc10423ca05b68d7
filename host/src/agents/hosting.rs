//! This process as one host of several on a shared database (DESIGN.md, "Several hosts"; the
//! store's side is [`ahp_store::hosts`] and [`ahp_store::moves`]).
//!
//! - **Joining.** [`Agents::join`] records the host with its next incarnation and a lease. On
//!   a database only this process serves (SQLite, guarded by the data directory's lock) every
//!   agent is adopted and the takeover of a previous process runs as it always has
//!   ([`Agents::take_over`]). On a shared database (PostgreSQL) the host claims back only what
//!   its own previous incarnation left, then the agents of every host whose lease lapsed.
//! - **The lease** ([`Agents::keep_lease`]) is renewed every third of its length. A host that
//!   could not renew in time — its process was stopped, the database was out of reach — stops
//!   every sandbox it runs before its lease can run out ([`Agents::lease_fresh`] is checked
//!   before every turn, and a running turn is cancelled the instant it stops holding:
//!   `Agents::lease_lost`), since another host may claim and run its agents from then on; when it
//!   learns it lost the lease it drops every carrier and joins again as a new incarnation, with
//!   no agents. Its writes for the agents it lost are refused by the store whatever it
//!   believes: the endpoint generation (and the carrying host, for checkpoints) fences them.
//! - **Claims** ([`Agents::claim_lapsed`]): the transfers of a lapsed host are bound here at
//!   the next generation by the claim itself, in slices ([`ahp_store::hosts`]'s claim), parked:
//!   no sandbox and no commit of their own until their next wake, when they resume from their
//!   checkpoints. The few the claim cannot carry on (no agent yet, no wake carrier to carry on)
//!   are bound one by one here.
//! - **Moves** ([`Agents::hand_over_moves`]): an agent an operator moves stops being claimed
//!   here; its worker hands it over between turns (`Agents::hand_over`); the receiving host
//!   binds it on its next repair (signalled at once, polled in any case).
//! - **Signals.** A post for an agent another host carries is signalled to it
//!   ([`Agents::signal_with`]); correctness never depends on the signal.

use std::time::{Duration, Instant};

use ahp_store::{Error as StoreError, HostClaim, HostLease};

use super::takeover::TakeoverReport;
use super::{Agents, CARRIER_LEASE, Carrier};
use crate::shared_store::StoreLock;

/// The default host lease: a dead host's agents answer again from a survivor within about
/// this long plus one poll.
pub const DEFAULT_HOST_LEASE: Duration = Duration::from_secs(15);

/// The part of its lease a host may use before it stops its sandboxes unless renewed: the
/// rest is the margin for clocks running at slightly different rates and for a renewal in
/// flight.
const FRESH_FRACTION: f64 = 0.8;

/// The lease this process holds, and when (on its own monotonic clock) it was last renewed.
#[derive(Debug, Clone)]
pub(crate) struct Hosting {
    lease: HostLease,
    length: Duration,
    /// When the renewal that set `lease` began (a lease is never counted from later).
    renewed: Instant,
    /// A shared database (other hosts may claim this one's agents).
    shared: bool,
}

/// What [`Agents::join`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinReport {
    /// The incarnation this process serves as.
    pub incarnation: u64,
    /// The takeover of a previous process, on a database only this process serves.
    pub takeover: Option<TakeoverReport>,
    /// What was claimed back from this host's previous incarnation, on a shared database.
    pub own: Option<HostClaim>,
    /// The lapsed hosts claimed.
    pub claimed: Vec<HostClaim>,
}

impl Agents {
    /// Joins the database as this store's host (see the [module docs](self)): `shared` for a
    /// database other hosts use too. `interrupted_reason` is recorded on each activation a
    /// previous process of a database only this one serves left in progress. On a shared
    /// database, a join while another process holds this host id's lease is refused (see
    /// [`join_taking_over`](Self::join_taking_over)); on a database only this process serves
    /// (its data directory's lock says so) any previous incarnation is gone.
    ///
    /// # Errors
    ///
    /// The store's refusal ([`StoreError::HostInUse`], a bad lease) or failure.
    pub fn join(
        &self,
        length: Duration,
        address: Option<&str>,
        shared: bool,
        interrupted_reason: &str,
    ) -> Result<JoinReport, crate::sandbox::Error> {
        self.join_as(length, address, shared, false, interrupted_reason)
    }

    /// Joins as [`join`](Self::join) does, fencing out a process that still holds this host
    /// id's lease (`ahp serve --take-over`: the operator knows it is gone, or wants it gone).
    ///
    /// # Errors
    ///
    /// The store's refusal (a bad lease) or failure.
    pub fn join_taking_over(
        &self,
        length: Duration,
        address: Option<&str>,
        shared: bool,
        interrupted_reason: &str,
    ) -> Result<JoinReport, crate::sandbox::Error> {
        self.join_as(length, address, shared, true, interrupted_reason)
    }

    fn join_as(
        &self,
        length: Duration,
        address: Option<&str>,
        shared: bool,
        take_over: bool,
        interrupted_reason: &str,
    ) -> Result<JoinReport, crate::sandbox::Error> {
        let started = Instant::now();
        let lease = if take_over || !shared {
            self.store.locked().take_over_host(length, address)
        } else {
            self.store.locked().join_host(length, address)
        }?;
        let incarnation = lease.incarnation;
        *self.hosting.locked() = Some(Hosting {
            lease: lease.clone(),
            length,
            renewed: started,
            shared,
        });
        if !shared {
            self.store.locked().adopt_all_hosts()?;
            let takeover = self.take_over(interrupted_reason)?;
            return Ok(JoinReport {
                incarnation,
                takeover: Some(takeover),
                ..JoinReport::default()
            });
        }
        let own = self.store.locked().claim_own_leftovers(&lease, CARRIER_LEASE)?;
        self.bind_transfers(&own.unbound);
        if own.parked > 0 {
            // What the previous incarnation left is parked here: those with a wake take a turn.
            self.schedule_all();
        }
        let claimed = self.claim_lapsed();
        self.refresh_peers(&lease.host);
        self.repair_bindings()?;
        Ok(JoinReport {
            incarnation,
            takeover: None,
            own: Some(own),
            claimed,
        })
    }

    /// The lease this process holds, if it joined.
    pub fn host_lease(&self) -> Option<HostLease> {
        self.hosting.locked().as_ref().map(|h| h.lease.clone())
    }

    /// Whether this process may run turns: it has not joined (a controller of its own, for
    /// tests and `ahp run`), it is the only host its database can have (SQLite: no other host
    /// can take its agents), or its lease was renewed within 80 % of its length.
    pub fn lease_fresh(&self) -> bool {
        self.hosting
            .locked()
            .as_ref()
            .is_none_or(|h| !h.shared || h.renewed.elapsed() < h.length.mul_f64(FRESH_FRACTION))
    }

    /// Completes when this process's host lease stops being fresh (see
    /// [`lease_fresh`](Self::lease_fresh)), with the reason: what cuts a running turn short
    /// before another host may claim its agent. Never completes for a process that has not
    /// joined a shared database. One timer, set again after each renewal.
    pub(crate) async fn lease_lost(&self) -> String {
        loop {
            let fresh_until = self
                .hosting
                .locked()
                .as_ref()
                .filter(|h| h.shared)
                .map(|h| h.renewed + h.length.mul_f64(FRESH_FRACTION));
            let Some(fresh_until) = fresh_until else {
                return std::future::pending().await;
            };
            tokio::time::sleep_until(fresh_until.into()).await;
            if !self.lease_fresh() {
                return "the host lease was not renewed in time: another host may carry the agent".into();
            }
        }
    }

    /// Renews the lease once a third of it has passed (and follows the database's clock
    /// again). A lease no longer fresh stops every sandbox first; a lease lost drops every
    /// carrier and joins again as a new incarnation (with no agents, unless none were claimed).
    /// Errors are logged: the next call tries again.
    pub fn keep_lease(&self) {
        let Some(h) = self.hosting.locked().clone() else { return };
        if !self.lease_fresh() && self.carrier_count() > 0 {
            tracing::warn!(host = %h.lease.host, "the host lease was not renewed in time; stopping every sandbox");
            self.fence_all();
        }
        if h.renewed.elapsed() < h.length / 3 {
            return;
        }
        let started = Instant::now();
        let renewed = {
            let mut db = self.store.locked();
            if let Err(e) = db.sync_database_clock() {
                tracing::warn!(error = %e, "cannot read the database's clock");
            }
            db.renew_host_lease(&h.lease, h.length)
        };
        match renewed {
            Ok(lease) => {
                self.refresh_peers(&lease.host);
                let fresh_again = !self.lease_fresh();
                *self.hosting.locked() = Some(Hosting {
                    lease,
                    renewed: started,
                    ..h
                });
                if fresh_again {
                    // Carriers were dropped while the lease was stale, and nobody claimed this
                    // host meanwhile: bind again what it still carries.
                    self.rebind_carried();
                }
            }
            Err(StoreError::HostLeaseLost { why, .. }) => {
                tracing::warn!(host = %h.lease.host, %why, "the host lost its lease; stopping every sandbox and joining again");
                self.fence_all();
                // Not this host's to bind again: the join claims back what is still its own.
                self.fenced.locked().clear();
                match self.join(h.length, None, h.shared, "interrupted: the host lost its lease") {
                    Ok(r) => tracing::info!(incarnation = r.incarnation, "joined again"),
                    Err(crate::sandbox::Error::Store(e @ StoreError::HostInUse { .. })) => tracing::error!(
                        error = %e,
                        "another process took this host id over; this one carries nothing until its lease runs out"
                    ),
                    Err(e) => tracing::error!(error = %e, "cannot join again; the next tick retries"),
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot renew the host lease; the next tick retries"),
        }
    }

    /// Claims the agents of every lapsed or stopped host and binds them here; returns the
    /// claims (logged, not fatal, when the store fails).
    pub fn claim_lapsed(&self) -> Vec<HostClaim> {
        let Some(h) = self.hosting.locked().clone() else {
            return Vec::new();
        };
        if !h.shared {
            return Vec::new();
        }
        let claims = match self.store.locked().claim_lapsed_hosts(&h.lease, CARRIER_LEASE) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim lapsed hosts");
                return Vec::new();
            }
        };
        for claim in &claims {
            tracing::warn!(
                host = %claim.host,
                transfers = claim.transfers.len(),
                parked = claim.parked,
                interrupted = claim.interrupted.len(),
                slices = claim.slices,
                "claimed the agents of a host whose lease lapsed"
            );
            self.bind_transfers(&claim.unbound);
        }
        if claims.iter().any(|c| c.parked > 0) {
            // The agents claimed are parked here: those with a wake waiting take a turn now.
            self.schedule_all();
        }
        claims
    }

    /// Binds again, at the next generation, every agent whose sandbox was stopped while this
    /// host's lease was not fresh and that its rows say this host still carries (a turn may
    /// have been cut short: the next generation fences what it left). A parked agent had no
    /// sandbox to stop: it is carried on at its generation, and costs nothing here.
    fn rebind_carried(&self) {
        let fenced = std::mem::take(&mut *self.fenced.locked());
        let mut transfers = Vec::new();
        for c in fenced.into_values() {
            match self.store.locked().carried_agent(&c.actor.agent) {
                Ok(Some(carried)) => transfers.push(carried.transfer.id),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(agent = %c.actor.agent, error = %e, "cannot read a fenced agent; the repair binds it if it needs it");
                }
            }
        }
        self.bind_transfers(&transfers);
    }

    /// Binds each of `transfers` here if it is still active (one that fails is left to the
    /// repair).
    fn bind_transfers(&self, transfers: &[String]) {
        for transfer in transfers {
            let t = match self.store.locked().transfer(transfer) {
                Ok(t) if t.status == ahp_store::TransferStatus::Active => t,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(%transfer, error = %e, "cannot read a claimed transfer");
                    continue;
                }
            };
            if let Err(e) = self.bind(&t) {
                tracing::warn!(%transfer, error = %e, "cannot bind a claimed transfer; the repair retries");
            }
        }
    }

    /// Marks the agents of the moves pending from this host as leaving (no more claims for
    /// them here) and schedules each, so its worker hands it over between turns.
    pub fn hand_over_moves(&self) {
        let moves = match self.store.locked().pending_moves() {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the pending moves");
                return;
            }
        };
        for m in moves {
            let held = self
                .carriers
                .locked()
                .values()
                .find(|c| c.transfer == m.transfer_id)
                .cloned();
            let Some(c) = held.or_else(|| self.parked_carrier_of(&m.transfer_id)) else {
                continue;
            };
            if self.leaving.locked().insert(c.actor.agent.clone()) {
                tracing::info!(agent = %c.actor.agent, to = %m.to_host, "moving an agent");
            }
            if self.queue.locked().push(&c.actor.agent) {
                self.ready.notify_one();
            }
        }
    }

    /// The carrier of `transfer`'s agent as its rows say, if this process carries it though
    /// it holds nothing of it (a parked agent). A failed read is logged: the next poll retries.
    fn parked_carrier_of(&self, transfer: &str) -> Option<Carrier> {
        let agent = match self.store.locked().transfer(transfer) {
            Ok(t) => t.agent_id?,
            Err(e) => {
                tracing::warn!(%transfer, error = %e, "cannot read a moving transfer");
                return None;
            }
        };
        match self.carrier_to_drive(&agent) {
            Ok(c) => c,
            Err(failure) => {
                tracing::warn!(%transfer, ?failure, "cannot read a moving agent's carrier");
                None
            }
        }
    }

    /// Whether `agent` is being moved away (its worker hands it over instead of a turn).
    pub(super) fn is_leaving(&self, agent: &str) -> bool {
        self.leaving.locked().contains(agent)
    }

    /// Hands `c`'s agent over to the host its move names, between turns (its worker calls it),
    /// drops the carrier and signals the receiving host.
    pub(super) fn hand_over(&self, c: &Carrier) {
        let agent = &c.actor.agent;
        let handed = self
            .store
            .locked()
            .hand_over_agent(&c.transfer, &c.actor.endpoint, c.actor.generation);
        self.leaving.locked().remove(agent);
        match handed {
            Ok(m) => {
                tracing::info!(%agent, to = %m.to_host, "handed the agent over");
                self.release_carrier(c);
                self.signal(format!("host {}", m.to_host));
            }
            Err(e @ StoreError::MoveTargetNotLive { .. }) => {
                tracing::warn!(%agent, error = %e, "the move's receiving host is gone; the agent stays here");
                self.schedule(agent);
            }
            Err(e) => tracing::warn!(%agent, error = %e, "cannot hand the agent over; it stays here"),
        }
    }

    /// Sends signals through `send` from now on (a post for an agent another host carries,
    /// a hand-over): on a shared database, a `NOTIFY` on a connection of its own.
    pub fn signal_with(&self, send: std::sync::mpsc::Sender<String>) {
        *self.signals.locked() = Some(send);
    }

    /// Sends `payload` if a signal channel is set (never blocks, never reads the store).
    pub(super) fn signal(&self, payload: String) {
        if let Some(s) = self.signals.locked().as_ref() {
            let _ = s.send(payload);
        }
    }

    /// Acts on a signal another host (or the operator's `ahp agent move`) sent: `wake AGENT`
    /// schedules an agent carried here; `host ID` (this host) starts the moves asked of it and
    /// binds what was handed to it. Anything else is ignored.
    pub fn on_signal(&self, payload: &str) {
        match payload.split_once(' ') {
            Some(("wake", agent)) => self.schedule(agent),
            Some(("host", host)) if self.host_lease().is_some_and(|l| l.host == host) => {
                self.hand_over_moves();
                if let Err(e) = self.repair_bindings() {
                    tracing::warn!(error = %e, "cannot bind what was handed over");
                }
            }
            _ => {}
        }
    }

    /// Leaves the database cleanly (at shutdown): other hosts may claim this one's agents at once.
    pub fn leave(&self) {
        let Some(h) = self.hosting.locked().take() else { return };
        if let Err(e) = self.store.locked().leave_host(&h.lease) {
            tracing::warn!(error = %e, "cannot record the host's leaving");
        }
    }

    /// Remembers which other hosts are live (their carriers count as ready here).
    fn refresh_peers(&self, me: &str) {
        let mut db = self.store.locked();
        let now = db.now();
        match db.hosts() {
            Ok(hosts) => {
                *self.peers.locked() = hosts
                    .into_iter()
                    .filter(|h| h.id != me && h.is_live(now))
                    .map(|h| h.id)
                    .collect();
            }
            Err(e) => tracing::debug!(error = %e, "cannot list the hosts"),
        }
    }

    /// Drops every carrier and sandbox this process holds, and remembers them
    /// ([`rebind_carried`](Self::rebind_carried) binds them again once the lease is fresh).
    fn fence_all(&self) {
        let held: Vec<Carrier> = self.carriers.locked().values().cloned().collect();
        for c in held {
            self.fence(c);
        }
    }

    /// Drops `c` and its sandbox because the host lease is not fresh, and remembers it
    /// ([`rebind_carried`](Self::rebind_carried) binds it again once the lease is fresh).
    pub(super) fn fence(&self, c: Carrier) {
        self.release_carrier(&c);
        self.fenced.locked().insert(c.actor.agent.clone(), c);
    }
}
