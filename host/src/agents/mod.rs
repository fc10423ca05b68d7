//! Transferred agents that keep running: the binding of an active transfer to its agent, and
//! the continuation controller that runs the agent's conversation turns in its sandbox.
//!
//! **Binding.** When a transfer becomes `active`, [`Agents::bind`] binds it to its Agent
//! identity (created on first activation, owned by the transfer's owner) and attaches a fresh
//! endpoint; if the component takes turns (`ahp:agent@0.2.0`), this process registers itself as
//! the endpoint's wake carrier ([`Carriers`]: the readiness flag). The carrier is the
//! endpoint's rows (wake-capable, naming this host); this process holds it in memory only while
//! the agent's sandbox is live here (`resident`). A parked agent costs no memory: its carrier is
//! read from the store when a wake comes for it ([`ahp_store::Store::carried_agent`]).
//!
//! **The controller** (the conversation protocol's semantics). A message commit (by any surface,
//! through [`crate::ops::posting`], for the agents it woke), a wake consume, a carrier registration
//! and an activation each *schedule* a dispatch opportunity for an agent ([`Agents::schedule`]):
//! a bounded, deduplicated queue (`queue`), no polling loop. The controller takes the agent
//! and [`drives`](Agents::drive_async) it as a task of its own on the runtime: a turn holds no
//! thread while its guest waits on its model, a tool or a sleep, and how many turns run at
//! once is bounded by the live sandboxes the host may hold, shared fairly between owners
//! ([`admission`]). The opportunity claims its pending wake through the exact endpoint and
//! generation and crosses the durable dispatch fence in one commit (`claim_and_dispatch`),
//! runs one `turn` in the sandbox under the tier's fuel and wall clock ([`outcome`]), and records
//! the outcome; only after the turn returned `ok` it exact-consumes the wake — that consume is
//! what proves the turn ran. The budget is read before anything is claimed, and the end of a
//! turn (outcome and consume, with the turn's last compute spend) is one store transaction
//! (`finish_turn_spending`). A failure before the fence changes nothing (the wake stays
//! pending); an `err`, a trap or a ceiling after it is `delivery_unknown`, never redispatched.
//! At most one turn per agent runs at a time; posts that arrive meanwhile coalesce into the
//! agent's one pending wake and one more opportunity.
//!
//! **No silent death** ([`recovery`]). A carrier is dropped only when the store says its
//! endpoint is really gone. A busy database, or a claim refused because an unresolved dispatch
//! is in the way, reschedules the agent with bounded backoff instead; the end of a turn is
//! retried in place and, if it still cannot be recorded, becomes `delivery_unknown` (or, if
//! even that fails, is settled at the agent's next opportunity: never left `dispatched`). A
//! transfer left without a carrier (its binding failed, or the process died between activation
//! and the bind) is bound again by [`Agents::repair_bindings`], on every reaper tick and at
//! takeover. The tick renews only leases less than half left ([`Agents::renew_leases`]) and
//! schedules only agents with a wake to claim ([`Agents::schedule_all`]).
//!
//! **Money.** A turn's fuel is charged to the transfer's budget like activation's (the
//! sandbox's meter; the last settlement of a turn that returned is recorded with the turn's
//! end, and stays owed if that end is not recorded), and so is the spend its guest reports.
//! An insolvent transfer's endpoint is no longer wake-capable (the store clears it), so its
//! agent gets no more turns; a terminated or expired one is detached by the store, and its
//! carrier and sandbox dropped here ([`Agents::sweep`]).

pub mod admission;
mod dispatch;
pub mod hosting;
pub mod outcome;
mod queue;
pub mod recovery;
mod resident;
pub mod takeover;
mod upkeep;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp_store::conversation::{AgentActor, Caller, Endpoint};
use ahp_store::{AgentBinding, Timestamp, Transfer};

use self::admission::Admission;
use self::queue::DispatchQueue;
use self::resident::Resident;
pub use self::upkeep::REPAIR_SLICE;
use crate::carrier::{Carriers, Residency};
use crate::sandbox::Sandboxes;
use crate::shared_store::{SharedStore, StoreLock};

/// How long an endpoint attached by a binding is leased; [`Agents::renew_leases`] renews it.
pub const CARRIER_LEASE: Duration = Duration::from_secs(3600);

/// Turns one dispatch opportunity may run back to back before the agent goes to the back of
/// the queue (fairness between agents).
pub const MAX_TURNS_PER_OPPORTUNITY: u32 = 4;

/// Transfers (or endpoints) read per page by the tick's repair and scheduling.
const PAGE: usize = 200;

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
    /// When the endpoint's lease runs out, as of its last registration or renewal here.
    pub lease_expires_at: Timestamp,
}

/// How the controller is sized.
#[derive(Debug, Clone, Copy)]
pub struct AgentsConfig {
    /// Most agents the dispatch queue holds (queued or running).
    pub capacity: usize,
    /// Most turns running at once ([`admission`]). `None` (the default): as many as the host
    /// may hold live sandboxes ([`Sandboxes::live_cap`]), at most [`MAX_RUNNING_TURNS`] — a
    /// running turn holds a sandbox, and no thread while it waits.
    pub running_turns: Option<usize>,
    /// The quiet period after which a goal an MCP App's agent controls, observed by its Goal
    /// Plan card, is stalled ([`crate::app_views::AppViews::quiet_period`]).
    pub goal_quiet_period: std::time::Duration,
}

/// The most turns running at once when neither the engine's pool nor the parking cap bounds
/// the live sandboxes.
pub const MAX_RUNNING_TURNS: usize = 10_000;

impl Default for AgentsConfig {
    fn default() -> Self {
        Self {
            // One slot per agent the store may hold; a slot exists only while its agent is queued.
            capacity: usize::try_from(crate::store::conversation::bounds::MAX_AGENTS).unwrap_or(usize::MAX),
            running_turns: None,
            goal_quiet_period: ahp_store::delegation::STALL_QUIET_PERIOD,
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
    /// A step failed transiently (see [`recovery`]): the carrier is kept and the agent is
    /// rescheduled with backoff.
    pub retry: bool,
    /// The last turn that did not return `ok`: how it ended and what its author needs to see.
    pub failure: Option<TurnFailure>,
}

/// A turn that did not return `ok` ([`Drive::failure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFailure {
    /// How it ended.
    pub outcome: crate::sandbox::RunOutcome,
    /// The trace and the guest's last output (`None` when the turn could not start).
    pub diagnosis: Option<crate::sandbox::Diagnosis>,
}

/// The agents this process carries, and its continuation controller. See the
/// [module docs](self).
pub struct Agents {
    store: SharedStore,
    sandboxes: Arc<Sandboxes>,
    /// This store's host: an endpoint naming it is carried here.
    host_id: String,
    /// The carriers held in memory: those of live agents (see `resident`).
    carriers: Mutex<Resident>,
    queue: Mutex<DispatchQueue>,
    ready: tokio::sync::Notify,
    /// The places of the turns running at once, shared between owners.
    admission: Admission,
    /// Consecutive rescheduled opportunities per agent (see [`recovery`]).
    retries: Mutex<HashMap<String, u32>>,
    /// Agents whose last turn's end could not be recorded at all: settled at their next
    /// opportunity, which the tick schedules.
    unsettled: Mutex<HashSet<String>>,
    /// Transfers this process is activating: the repair leaves them to their activation's bind.
    activating: Mutex<HashSet<String>>,
    /// Where the periodic repair's next slice starts (`upkeep`): `None` starts a new walk.
    repair_after: Mutex<Option<String>>,
    /// The host lease this process holds, once it joined ([`hosting`]).
    hosting: Mutex<Option<hosting::Hosting>>,
    /// The carriers a stale host lease made this process drop, to bind again once it is fresh
    /// ([`hosting`]).
    fenced: Mutex<HashMap<String, Carrier>>,
    /// Agents being moved to another host: handed over instead of claimed ([`hosting`]).
    leaving: Mutex<HashSet<String>>,
    /// Where signals for other hosts go, on a shared database ([`Agents::signal_with`]).
    signals: Mutex<Option<std::sync::mpsc::Sender<String>>>,
    /// The other hosts whose lease held at the last renewal of this one's ([`hosting`]).
    peers: Mutex<HashSet<String>>,
    /// The MCP App Views bound through this process (the App carrier's process-local half).
    views: crate::app_views::AppViews,
}

/// Marks a transfer as being activated by this process until dropped ([`Agents::activating`]).
#[derive(Debug)]
pub struct Activating<'a> {
    agents: &'a Agents,
    transfer: String,
}

impl Drop for Activating<'_> {
    fn drop(&mut self) {
        self.agents.activating.locked().remove(&self.transfer);
    }
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agents")
            .field("carriers", &self.carriers.locked().len())
            .finish_non_exhaustive()
    }
}

impl Carriers for Agents {
    fn holds(&self, endpoint: &ahp_store::conversation::Endpoint) -> bool {
        let here = self.carried(endpoint).is_some()
            || self.carries_by_rows(endpoint)
            || (endpoint.wake_capable && self.views.holds(endpoint));
        // Another host's: its sandbox, or an App View bound through it, while its lease holds.
        let peer = |h: Option<&str>| h.is_some_and(|h| self.peers.locked().contains(h));
        here || (endpoint.wake_capable && (peer(endpoint.host_id.as_deref()) || peer(endpoint.app_host_id.as_deref())))
    }

    fn app_views(&self) -> Option<&crate::app_views::AppViews> {
        Some(&self.views)
    }

    fn residency(&self, endpoint: &ahp_store::conversation::Endpoint) -> Option<Residency> {
        match self.carried(endpoint) {
            Some(transfer) if self.sandboxes.is_live(&transfer) => Some(Residency::Live),
            Some(_) => Some(Residency::Parked),
            None => self.carries_by_rows(endpoint).then_some(Residency::Parked),
        }
    }

    fn schedule_woken(&self, agents: &[String]) {
        for agent in agents {
            if !self.carriers.locked().contains(agent) {
                // Parked here (its worker reads its carrier), or another host's: tell it too (a
                // no-op without a shared database).
                self.signal(format!("wake {agent}"));
            }
            self.schedule(agent);
        }
    }

    fn parked(&self, transfers: &[String]) {
        let mut carriers = self.carriers.locked();
        for transfer in transfers {
            if !self.sandboxes.is_live(transfer) {
                carriers.remove_transfer(transfer);
            }
        }
    }
}

impl Agents {
    /// The transfer of this process's carrier for exactly `endpoint` (its agent, id and
    /// generation), if it holds one.
    fn carried(&self, endpoint: &ahp_store::conversation::Endpoint) -> Option<String> {
        let carriers = self.carriers.locked();
        let c = carriers.get(&endpoint.agent_id)?;
        (c.actor.endpoint == endpoint.id && c.actor.generation == endpoint.generation).then(|| c.transfer.clone())
    }

    /// Whether `endpoint`'s rows say this process carries it (wake-capable, attached, held by
    /// this host) while its host lease is fresh: a parked agent's readiness.
    fn carries_by_rows(&self, endpoint: &ahp_store::conversation::Endpoint) -> bool {
        endpoint.wake_capable
            && endpoint.host_held
            && endpoint.state == ahp_store::conversation::EndpointState::Attached
            && endpoint.host_id.as_deref() == Some(self.host_id.as_str())
            && self.lease_fresh()
    }

    /// The carrier of `agent` for a turn: the one held, or else the one its rows say this
    /// process carries (a parked agent, or one carried since a restart), then held. `None` for
    /// an agent not carried here, or one this process is activating (its activation takes the
    /// carrier up).
    pub(super) fn carrier_to_drive(&self, agent: &str) -> Result<Option<Carrier>, recovery::Failure> {
        if let Some(c) = self.carrier(agent) {
            return Ok(Some(c));
        }
        let carried = self
            .store
            .locked()
            .carried_agent(agent)
            .map_err(|e| recovery::Failure::of_store(&e))?;
        let Some(carried) = carried else { return Ok(None) };
        if self.activating.locked().contains(&carried.transfer.id) {
            return Ok(None);
        }
        let caller = carried
            .transfer
            .owner()
            .and_then(|o| o.host_caller())
            .map_err(|e| recovery::Failure::Refused(e.to_string()))?;
        let c = Carrier {
            transfer: carried.transfer.id,
            actor: AgentActor::of(&carried.endpoint),
            caller,
            lease_expires_at: carried.endpoint.lease_expires_at,
        };
        self.carriers.locked().insert(c.clone());
        Ok(Some(c))
    }

    /// A controller over `store` that runs its agents in `sandboxes` (workers start with
    /// [`run_workers`](Self::run_workers)).
    pub fn new(store: SharedStore, sandboxes: Arc<Sandboxes>, config: AgentsConfig) -> Self {
        let host_id = store.locked().host_id().to_owned();
        let running_turns = config
            .running_turns
            .unwrap_or_else(|| sandboxes.live_cap().min(MAX_RUNNING_TURNS));
        Self {
            store,
            sandboxes,
            host_id,
            carriers: Mutex::new(Resident::default()),
            queue: Mutex::new(DispatchQueue::new(config.capacity.max(1))),
            ready: tokio::sync::Notify::new(),
            admission: Admission::new(running_turns),
            retries: Mutex::new(HashMap::new()),
            unsettled: Mutex::new(HashSet::new()),
            activating: Mutex::new(HashSet::new()),
            repair_after: Mutex::new(None),
            hosting: Mutex::new(None),
            fenced: Mutex::new(HashMap::new()),
            leaving: Mutex::new(HashSet::new()),
            signals: Mutex::new(None),
            peers: Mutex::new(HashSet::new()),
            views: crate::app_views::AppViews::with_quiet_period(config.goal_quiet_period),
        }
    }

    /// The sandboxes the turns run in.
    pub fn sandboxes(&self) -> &Arc<Sandboxes> {
        &self.sandboxes
    }

    /// How many carriers this process holds in memory (those of its live agents: a parked
    /// agent's is read from the store when it is woken).
    pub fn carrier_count(&self) -> usize {
        self.carriers.locked().len()
    }

    /// The carrier of `agent`, if this process holds it in memory (not a parked agent's).
    pub fn carrier(&self, agent: &str) -> Option<Carrier> {
        self.carriers.locked().get(agent).cloned()
    }

    /// Takes every agent queued for a dispatch opportunity, in order, without running it: for
    /// tests and diagnostics of a controller whose workers are not running.
    #[doc(hidden)]
    pub fn drain_queue(&self) -> Vec<String> {
        self.queue.locked().drain()
    }

    /// Binds the `active` transfer `t` to its agent (see the [module docs](self)), registers
    /// this process as the wake carrier if its component takes turns, and schedules the agent
    /// (deliveries may already wait for it).
    ///
    /// # Errors
    ///
    /// The store's refusal (not active, …) or failure. A failure leaves the transfer without a
    /// carrier; [`repair_bindings`](Self::repair_bindings) binds it on the next tick.
    pub fn bind(&self, t: &Transfer) -> Result<AgentBinding, crate::sandbox::Error> {
        let binding = self.store.locked().bind_transfer_agent(&t.id, CARRIER_LEASE)?;
        let takes_turns = self.sandboxes.takes_turns(t).unwrap_or(false);
        if takes_turns {
            let ep = &binding.endpoint;
            let registered = self
                .store
                .locked()
                .register_wake_carrier(&ep.agent_id, &ep.id, ep.generation)?;
            self.carry(t, &registered)?;
        }
        Ok(binding)
    }

    /// Takes up the carrier of `t`'s agent through `registered`, its endpoint just registered
    /// as this process's wake carrier (by [`bind`](Self::bind), or by the activation's own
    /// completing commit), and schedules the agent (deliveries may already wait for it).
    ///
    /// # Errors
    ///
    /// A transfer whose owner row cannot be read.
    pub fn carry(&self, t: &Transfer, registered: &Endpoint) -> Result<(), crate::sandbox::Error> {
        let carrier = Carrier {
            transfer: t.id.clone(),
            actor: AgentActor::of(registered),
            caller: t.owner()?.host_caller()?,
            lease_expires_at: registered.lease_expires_at,
        };
        self.carriers.locked().insert(carrier);
        self.schedule(&registered.agent_id);
        Ok(())
    }

    /// Marks `transfer` as being activated by this process until the guard is dropped:
    /// [`repair_bindings`](Self::repair_bindings) leaves it to the activation's own bind.
    pub fn activating(&self, transfer: &str) -> Activating<'_> {
        self.activating.locked().insert(transfer.to_owned());
        Activating {
            agents: self,
            transfer: transfer.to_owned(),
        }
    }

    /// Schedules one dispatch opportunity for `agent` unless this process is moving it away;
    /// its worker drives it if this process carries it (held, or as its rows say). A card whose
    /// acquire waits for the agent's wake here looks at the store again ([`AppViews::woken`]).
    ///
    /// [`AppViews::woken`]: crate::app_views::AppViews::woken
    pub fn schedule(&self, agent: &str) {
        self.views.woken(agent);
        if self.is_leaving(agent) {
            return;
        }
        if self.queue.locked().push(agent) {
            self.ready.notify_one();
        }
    }

    /// How many turns may run at once, and how many do now.
    pub fn running_turns(&self) -> (usize, usize) {
        (self.admission.total(), self.admission.running())
    }

    /// Runs the controller until the task is dropped: each agent taken from the queue is
    /// driven by a task of its own on the runtime (its turns wait for a place of the
    /// [`admission`], fair between owners), so an agent whose turn waits on its model holds
    /// no thread and keeps no other agent waiting. The queue holds an agent once, so no two
    /// tasks drive one agent. Dropping this future drops every task it started.
    pub async fn run_workers(self: Arc<Self>) {
        let mut opportunities = tokio::task::JoinSet::new();
        // Stopped with the set, when this future is dropped.
        opportunities.spawn(self.admission.clone().watch_pressure());
        loop {
            while let Some(ended) = opportunities.try_join_next() {
                if let Err(e) = ended {
                    tracing::error!(error = %e, "a dispatch task failed");
                }
            }
            let next = self.queue.locked().pop();
            let Some(agent) = next else {
                tokio::select! {
                    () = self.ready.notified() => {}
                    Some(Err(e)) = opportunities.join_next(), if !opportunities.is_empty() => {
                        tracing::error!(error = %e, "a dispatch task failed");
                    }
                }
                continue;
            };
            let me = self.clone();
            opportunities.spawn(async move { me.opportunity(agent).await });
        }
    }

    /// One dispatch opportunity of `agent` as the controller runs it: the drive, then the
    /// retry bookkeeping, then the agent's queue slot given back.
    async fn opportunity(self: Arc<Self>, agent: String) {
        /// Gives the agent's queue slot back however the opportunity ends (a panic included).
        struct Done<'a>(&'a Agents, &'a str);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                if self.0.queue.locked().done(self.1) {
                    self.0.ready.notify_one();
                }
            }
        }
        let _done = Done(&self, &agent);
        match self.drive_async(&agent).await {
            Ok(d) if d.retry => self.reschedule_later(&agent),
            Ok(_) => {
                self.retries.locked().remove(&agent);
            }
            Err(e) => tracing::warn!(%agent, error = %e, "dispatch failed; the next tick tries again"),
        }
    }

    /// Stops carrying `agent`: forgets its carrier and drops its sandbox (also one out for a
    /// turn: it is dropped when the turn ends).
    pub fn release(&self, agent: &str) {
        if let Some(c) = self.carriers.locked().remove(agent) {
            self.sandboxes.drop_sandbox(&c.transfer);
        }
    }

    /// Forgets `c` if it is still the carrier held for its agent, without touching its sandbox
    /// or its rows (the agent stays carried here: a wake reads its carrier again).
    pub(super) fn forget_carrier(&self, c: &Carrier) {
        let mut carriers = self.carriers.locked();
        if carriers.get(&c.actor.agent).is_some_and(|held| held.actor == c.actor) {
            carriers.remove(&c.actor.agent);
        }
    }

    /// Releases `c` if it is still the carrier held for its agent (not one a later bind put in
    /// its place).
    pub(super) fn release_carrier(&self, c: &Carrier) {
        let removed = {
            let mut carriers = self.carriers.locked();
            let same = carriers.get(&c.actor.agent).is_some_and(|held| held.actor == c.actor);
            same && carriers.remove(&c.actor.agent).is_some()
        };
        if removed {
            self.sandboxes.drop_sandbox(&c.transfer);
        }
    }
}
