//! Transferred agents that keep running: the binding of an active transfer to its agent, and
//! the continuation controller that runs the agent's conversation turns in its sandbox.
//!
//! **Binding.** When a transfer becomes `active`, [`Agents::bind`] binds it to its Agent
//! identity (created on first activation, owned by the transfer's owner) and attaches a fresh
//! endpoint; if the component takes turns (`ahp:agent@0.2.0`), this process registers itself as
//! the endpoint's wake carrier and holds it ([`Carriers`]: the readiness flag).
//!
//! **The controller** (the conversation seed's semantics). A message commit (by any surface,
//! through [`crate::posting`], for the agents it woke), a wake consume, a carrier registration
//! and an activation each *schedule* a dispatch opportunity for an agent ([`Agents::schedule`]):
//! a bounded, deduplicated queue ([`queue`]), no polling loop. A worker takes the agent and
//! [`drives`](Agents::drive) it: claims its pending wake through the exact endpoint and
//! generation (`claim_wake`), crosses the durable dispatch fence
//! (`prepare_dispatch`), runs one `turn` in the sandbox under the tier's fuel and wall clock
//! ([`turn`]), records the outcome (`finish_dispatch`), and only after the turn returned `ok`
//! exact-consumes the wake — that consume is what proves the turn ran. A failure before the
//! fence leaves the claim to lapse back to pending; an `err`, a trap or a ceiling after it is
//! `delivery_unknown`, never redispatched. At most one turn per agent runs at a time; posts
//! that arrive meanwhile coalesce into the agent's one pending wake and one more opportunity.
//!
//! **Money.** A turn's fuel is charged to the transfer's budget like activation's (the
//! sandbox's meter), and so is the spend its guest reports. An insolvent transfer's endpoint is
//! no longer wake-capable (the store clears it), so its agent gets no more turns; a terminated
//! or expired one is detached by the store, and its carrier and sandbox dropped here
//! ([`Agents::sweep`]).

mod queue;
pub mod takeover;
pub mod turn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp_store::conversation::{AgentActor, Caller, DispatchOutcome};
use ahp_store::{AgentBinding, Transfer, TransferStatus};

use self::queue::DispatchQueue;
pub use self::turn::run_turn;
use crate::carrier::Carriers;
use crate::interfaces::TurnCtx;
use crate::sandbox::{Call, Sandboxes, TurnOutcome};
use crate::shared_store::StoreLock;

/// How long an endpoint attached by a binding is leased; [`Agents::renew_leases`] renews it.
pub const CARRIER_LEASE: Duration = Duration::from_secs(3600);

/// Turns one dispatch opportunity may run back to back before the agent goes to the back of
/// the queue (fairness between agents).
pub const MAX_TURNS_PER_OPPORTUNITY: u32 = 4;

/// A wake carrier this process holds: the live sandbox of `transfer`, through `endpoint` at
/// `generation`, acting for the transfer's owner.
#[derive(Debug, Clone)]
pub struct Carrier {
    /// The transfer.
    pub transfer: String,
    /// Its agent and the endpoint and generation the carrier was registered for.
    pub actor: AgentActor,
    /// The transfer's owner, for whom the host acts.
    pub caller: Caller,
}

/// How the controller is sized.
#[derive(Debug, Clone, Copy)]
pub struct AgentsConfig {
    /// Most agents the dispatch queue holds (queued or running).
    pub capacity: usize,
    /// Workers running turns at once (each turn occupies one blocking thread).
    pub workers: usize,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        Self {
            capacity: 100_000,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()).max(2),
        }
    }
}

/// What one dispatch opportunity did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drive {
    /// Turns that returned `ok` and consumed their wake.
    pub consumed: u32,
    /// Turns whose wake ended `delivery_unknown`.
    pub unknown: u32,
    /// Fuel the turns burnt (charged to the transfer's budget at its tier's rate).
    pub fuel_consumed: u64,
}

/// The agents this process carries, and its continuation controller. See the
/// [module docs](self).
pub struct Agents {
    sandboxes: Arc<Sandboxes>,
    carriers: Mutex<HashMap<String, Carrier>>,
    queue: Mutex<DispatchQueue>,
    ready: tokio::sync::Notify,
    config: AgentsConfig,
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agents")
            .field("carriers", &self.carriers.locked().len())
            .finish_non_exhaustive()
    }
}

impl Carriers for Agents {
    fn holds(&self, endpoint: &str, generation: u64) -> bool {
        self.carriers
            .locked()
            .values()
            .any(|c| c.actor.endpoint == endpoint && c.actor.generation == generation)
    }

    fn schedule_woken(&self, agents: &[String]) {
        for agent in agents {
            self.schedule(agent);
        }
    }
}

impl Agents {
    /// A controller over `sandboxes` (workers start with [`run_workers`](Self::run_workers)).
    pub fn new(sandboxes: Arc<Sandboxes>, config: AgentsConfig) -> Self {
        Self {
            sandboxes,
            carriers: Mutex::new(HashMap::new()),
            queue: Mutex::new(DispatchQueue::new(config.capacity.max(1))),
            ready: tokio::sync::Notify::new(),
            config,
        }
    }

    /// The sandboxes the turns run in.
    pub fn sandboxes(&self) -> &Arc<Sandboxes> {
        &self.sandboxes
    }

    /// How many carriers this process holds.
    pub fn carrier_count(&self) -> usize {
        self.carriers.locked().len()
    }

    /// The carrier of `agent`, if this process holds it.
    pub fn carrier(&self, agent: &str) -> Option<Carrier> {
        self.carriers.locked().get(agent).cloned()
    }

    /// Binds the `active` transfer `t` to its agent (see the [module docs](self)), registers
    /// this process as the wake carrier if its component takes turns, and schedules the agent
    /// (deliveries may already wait for it).
    ///
    /// # Errors
    ///
    /// The store's refusal (not active, …) or failure.
    pub fn bind(&self, t: &Transfer) -> Result<AgentBinding, crate::sandbox::Error> {
        let binding = self.sandboxes.db().bind_transfer_agent(&t.id, CARRIER_LEASE)?;
        let takes_turns = self.sandboxes.takes_turns(t).unwrap_or(false);
        if takes_turns {
            let ep = &binding.endpoint;
            self.sandboxes
                .db()
                .register_wake_carrier(&ep.agent_id, &ep.id, ep.generation)?;
            let carrier = Carrier {
                transfer: t.id.clone(),
                actor: AgentActor::of(ep),
                caller: t.owner()?.caller()?,
            };
            self.carriers.locked().insert(binding.agent.id.clone(), carrier);
            self.schedule(&binding.agent.id);
        }
        Ok(binding)
    }

    /// Schedules one dispatch opportunity for `agent` if this process holds its carrier.
    pub fn schedule(&self, agent: &str) {
        if !self.carriers.locked().contains_key(agent) {
            return;
        }
        if self.queue.locked().push(agent) {
            self.ready.notify_one();
        }
    }

    /// Schedules every agent this process carries (the safety net after a restart or for
    /// posts another process committed; run on the reaper's tick).
    pub fn schedule_all(&self) {
        let agents: Vec<String> = self.carriers.locked().keys().cloned().collect();
        for agent in agents {
            self.schedule(&agent);
        }
    }

    /// Runs the workers until the task is dropped: each waits for a scheduled agent and drives
    /// it on a blocking thread.
    pub async fn run_workers(self: Arc<Self>) {
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..self.config.workers.max(1) {
            let me = self.clone();
            workers.spawn(async move {
                loop {
                    let next = me.queue.locked().pop();
                    let Some(agent) = next else {
                        me.ready.notified().await;
                        continue;
                    };
                    let runner = me.clone();
                    let a = agent.clone();
                    match tokio::task::spawn_blocking(move || runner.drive(&a)).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => tracing::warn!(%agent, error = %e, "dispatch failed"),
                        Err(e) => tracing::error!(%agent, error = %e, "dispatch task failed"),
                    }
                    if me.queue.locked().done(&agent) {
                        me.ready.notify_one();
                    }
                }
            });
        }
        while workers.join_next().await.is_some() {}
    }

    /// One dispatch opportunity for `agent` (blocking): up to [`MAX_TURNS_PER_OPPORTUNITY`]
    /// turns, each for one claimed wake (see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// A store failure; what was recorded before it stays recorded.
    pub fn drive(&self, agent: &str) -> Result<Drive, crate::sandbox::Error> {
        let mut drive = Drive::default();
        for _ in 0..MAX_TURNS_PER_OPPORTUNITY {
            let Some(carrier) = self.carrier(agent) else {
                break;
            };
            let (caller, actor) = (&carrier.caller, &carrier.actor);
            let t = self.sandboxes.db().transfer(&carrier.transfer)?;
            if t.status != TransferStatus::Active {
                self.release(agent);
                break;
            }
            let lease = t
                .tier
                .map_or(Duration::from_secs(30), |tier| tier.limits().wall_clock_per_turn)
                .saturating_add(Duration::from_secs(30))
                .min(ahp_store::conversation::bounds::MAX_CLAIM_LEASE);
            let claim = match self.sandboxes.db().claim_wake(caller, actor, lease) {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    // The endpoint was replaced, detached, expired or is no longer
                    // wake-capable: this process no longer carries it.
                    tracing::info!(%agent, error = %e, "cannot claim; dropping the carrier");
                    self.release(agent);
                    break;
                }
            };
            // The durable dispatch fence: from here on this wake is never dispatched again.
            let ticket = self.sandboxes.db().prepare_dispatch(caller, actor, &claim.attempt.id)?;
            let ctx = TurnCtx {
                caller: caller.clone(),
                actor: actor.clone(),
                queued: ticket.wake.delivery_count,
                wake: ticket.wake.clone(),
                replies: 0,
            };
            let outcome = match run_turn(&self.sandboxes, &carrier.transfer, Call::Turn(Box::new(ctx))) {
                Ok(report) => {
                    drive.fuel_consumed += report.fuel_consumed;
                    report.outcome
                }
                Err(e) => {
                    tracing::warn!(%agent, error = %e, "the turn could not run");
                    TurnOutcome::Stopped(e.to_string())
                }
            };
            let mut db = self.sandboxes.db();
            if outcome == TurnOutcome::Resumed {
                db.finish_dispatch(caller, actor, &ticket.attempt.id, DispatchOutcome::Accepted)?;
                db.consume_wake(caller, actor, &ticket.wake.id, &ticket.consume_token)?;
                drive.consumed += 1;
            } else {
                tracing::info!(%agent, wake = %ticket.wake.id, ?outcome, "turn did not succeed: delivery unknown");
                // A turn that ended its transfer also detached its endpoint, which settled the
                // attempt as `delivery_unknown` already: the endpoint is then gone.
                if let Err(e) = db.finish_dispatch(caller, actor, &ticket.attempt.id, DispatchOutcome::Unknown) {
                    tracing::info!(%agent, error = %e, "the attempt was settled with its endpoint");
                }
                drive.unknown += 1;
                drop(db);
                if self.sandboxes.db().transfer(&carrier.transfer)?.status != TransferStatus::Active {
                    self.release(agent);
                }
                break;
            }
        }
        Ok(drive)
    }

    /// Stops carrying `agent`: forgets its carrier and drops its sandbox.
    pub fn release(&self, agent: &str) {
        if let Some(c) = self.carriers.locked().remove(agent) {
            self.sandboxes.drop_sandbox(&c.transfer);
        }
    }

    /// Drops the carriers (and sandboxes) of transfers no longer `active`; returns their
    /// transfer ids.
    ///
    /// # Errors
    ///
    /// A store failure while reading a transfer.
    pub fn sweep(&self) -> Result<Vec<String>, crate::sandbox::Error> {
        let held: Vec<(String, String)> = self
            .carriers
            .locked()
            .iter()
            .map(|(a, c)| (a.clone(), c.transfer.clone()))
            .collect();
        let mut ended = Vec::new();
        for (agent, transfer) in held {
            let active = match self.sandboxes.db().transfer(&transfer) {
                Ok(t) => t.status == TransferStatus::Active,
                Err(ahp_store::Error::TransferNotFound(_)) => false,
                Err(e) => return Err(e.into()),
            };
            if !active {
                self.release(&agent);
                ended.push(transfer);
            }
        }
        Ok(ended)
    }

    /// Renews the endpoint lease of every carrier this process holds.
    pub fn renew_leases(&self) {
        let held: Vec<(String, Carrier)> = self
            .carriers
            .locked()
            .iter()
            .map(|(a, c)| (a.clone(), c.clone()))
            .collect();
        for (agent, c) in held {
            let renewed = self.sandboxes.db().renew_carrier_lease(
                &c.actor.agent,
                &c.actor.endpoint,
                c.actor.generation,
                CARRIER_LEASE,
            );
            if let Err(e) = renewed {
                tracing::info!(%agent, error = %e, "cannot renew the carrier's lease; dropping it");
                self.release(&agent);
            }
        }
    }
}
