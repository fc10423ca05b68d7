//! What the `ahp:agent` interfaces see of a sandbox: its [`AgentCtx`], reached through
//! [`AgentView`] — the way wasmtime-wasi's interfaces see only a `WasiCtxView`.
//!
//! The adapters in this module's siblings depend on this context and nothing else of the
//! sandbox: the sandbox's Store data implements [`AgentView`] (and [`Metered`], for the one
//! interface that needs the Store's fuel), never the other way round.

use std::cell::Cell;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ahp_store::SnapshotInput;
use ahp_store::conversation::{AgentActor, Caller, Wake};
use wasmtime::StoreContextMut;

use super::journal::Journal;
use crate::carrier::Carriers;
use crate::policy::Grants;
use crate::shared_store::{SharedStore, StoreLock};
use crate::vault::Vault;

/// Credential resolutions one turn may make.
pub const MAX_RESOLUTIONS_PER_TURN: u32 = 64;
/// `metering.report` calls one turn may make.
pub const MAX_REPORTS_PER_TURN: u32 = 256;
/// Checkpoint saves one turn may make.
pub const MAX_SAVES_PER_TURN: u32 = 64;
/// Inbox and transcript reads one turn may make.
pub const MAX_READS_PER_TURN: u32 = 1024;
/// `checkpoint.load` calls one turn may make: like saves, a turn loads its working memory once
/// or a few times, and each load copies up to the tier's checkpoint ceiling out of the database.
pub const MAX_LOADS_PER_TURN: u32 = 64;
/// `metering.budget` calls one turn may make: like reports, since each settles the CPU meter
/// first (a durable write whenever fuel was burnt since the last settlement) and then reads
/// the budget.
pub const MAX_BUDGET_CALLS_PER_TURN: u32 = 256;
/// `conversations.consume` calls one turn may make: four inbox pages' worth. A consume that
/// has something to do is held for the turn's end, which records them all in its commit (the
/// store's bound on one end's consumes is the same); deliveries a turn cannot consume stay
/// queued.
pub const MAX_CONSUMES_PER_TURN: u32 = ahp_store::conversation::bounds::MAX_TURN_CONSUMES as u32;

/// Guests that may be in the database at once through a host's default pool
/// ([`ahp_store::DEFAULT_POOL_CONNECTIONS`]; see [`guest_seats`]).
pub const GUEST_SEATS: usize = guest_seats(ahp_store::DEFAULT_POOL_CONNECTIONS);

/// Guests that may be in the database at once through a pool of `connections` (see
/// [`AgentCtx::db`]): half of them, at least one, so the host's other clients (tools, console,
/// controller) always find connections guests cannot take, while several guests' commits still
/// share an fsync. A host on one connection lets one guest at a time at it.
pub const fn guest_seats(connections: usize) -> usize {
    if connections < 2 { 1 } else { connections / 2 }
}

/// The seats guests take the database through (see [`AgentCtx::db`]). Process-wide: guests of
/// every host in the process share them, which only serializes them more.
static GUEST_GATE: GuestGate = GuestGate {
    taken: std::sync::Mutex::new(0),
    freed: std::sync::Condvar::new(),
};

/// A counting gate: how many guests are in the database.
struct GuestGate {
    taken: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl GuestGate {
    /// A seat among `seats` if one is free now.
    fn try_seat(&self, seats: usize) -> Option<GuestSeat<'_>> {
        let mut taken = self.taken.locked();
        (*taken < seats).then(|| {
            *taken += 1;
            GuestSeat(self)
        })
    }

    /// A seat among `seats`, waiting while that many are taken; given back when the guard
    /// drops.
    fn seat(&self, seats: usize) -> GuestSeat<'_> {
        let mut taken = self.taken.locked();
        while *taken >= seats {
            taken = self
                .freed
                .wait(taken)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *taken += 1;
        GuestSeat(self)
    }
}

/// One guest's seat at the [`GuestGate`].
struct GuestSeat<'a>(&'a GuestGate);

impl Drop for GuestSeat<'_> {
    fn drop(&mut self) {
        *self.0.taken.locked() -= 1;
        // Every waiter: one whose host allows fewer seats may not be the one that fits.
        self.0.freed.notify_all();
    }
}

/// Database calls a turn makes before each further one pauses as long as it held the lock
/// (see [`AgentCtx::db`]): more than an honest turn makes — 64 replies, their consumes, a few
/// pages of inbox and transcript, checkpoint and metering — and far fewer than a guest looping
/// on a host call reaches.
pub const UNPACED_STORE_CALLS_PER_TURN: u32 = 160;

/// Per-turn counts of the host calls that are bounded per turn, so a guest cannot turn cheap
/// calls into an unbounded stream of durable writes (each is an fsync) or database reads.
#[derive(Debug, Default, Clone, Copy)]
pub struct TurnCalls {
    /// `credentials.resolve` calls.
    pub resolutions: u32,
    /// `metering.report` calls.
    pub reports: u32,
    /// `checkpoint.save` calls.
    pub saves: u32,
    /// `conversations.inbox` and `conversations.transcript` calls.
    pub reads: u32,
    /// `checkpoint.load` calls.
    pub loads: u32,
    /// `metering.budget` calls.
    pub budgets: u32,
    /// `conversations.consume` calls.
    pub consumes: u32,
    /// `model.complete` calls.
    pub completions: u32,
    /// `model.estimate` calls.
    pub estimates: u32,
    /// `delegation` calls (reads and writes).
    pub delegation: u32,
    /// `delegation` writes.
    pub delegation_writes: u32,
    /// `delegation` keyed writes so far, per function (create-task, register-wait,
    /// create-goal, checkpoint-goal): the next call's idempotency index.
    pub delegation_keys: [u32; 4],
}

/// The conversation turn a sandbox is running: set by the controller for `turn`, absent for
/// `resume`.
#[derive(Debug, Clone)]
pub struct TurnCtx {
    /// The transfer's owner, for whom the host acts.
    pub caller: Caller,
    /// The agent, through the endpoint and generation the host holds the carrier of.
    pub actor: AgentActor,
    /// The dispatched wake this turn runs for.
    pub wake: Wake,
    /// Deliveries queued when the turn started.
    pub queued: u64,
    /// Replies posted so far: the next reply's operation index.
    pub replies: u32,
}

impl TurnCtx {
    /// The agent acting, as the store's calls take it.
    pub fn acting(&self) -> ahp_store::conversation::Acting {
        ahp_store::conversation::Acting::Agent(self.actor.clone())
    }
}

/// The sandbox as the `ahp:agent` interfaces see it.
pub struct AgentCtx {
    /// The transfer the sandbox continues.
    pub transfer: String,
    /// Its snapshot.
    pub snapshot: Arc<SnapshotInput>,
    /// What the operator's policy, narrowed by the snapshot, lets this guest reach and use.
    pub grants: Arc<Grants>,
    /// The tier's checkpoint ceiling, in bytes.
    pub checkpoint_bytes: u64,
    /// The host's database.
    pub db: SharedStore,
    /// The host's vault.
    pub vault: Arc<dyn Vault>,
    /// This turn's bounded calls so far.
    pub calls: TurnCalls,
    /// The conversation turn, if this is one.
    pub turn: Option<TurnCtx>,
    /// The queued deliveries this turn consumed since its last reply, in order, each once:
    /// recorded with its next reply's commit or its end's (the controller's `finish`), not a
    /// commit each. The turn's own inbox reads already show them consumed.
    pub consumed: Vec<String>,
    /// The queued deliveries this turn's inbox reads returned, each once with the tries it had
    /// then, at most [`MAX_CONSUMES_PER_TURN`]: those still queued at the turn's end count one
    /// more try; `tries` answers from here.
    pub read: Vec<(String, u32)>,
    /// Time this turn spent in the database (reads and commits, lock waits included).
    pub store_time: Cell<Duration>,
    /// Database calls this turn made (see [`db`](Self::db)).
    pub store_calls: Cell<u32>,
    /// When the current turn (or activation) started.
    pub turn_started: Instant,
    /// The tier's wall clock per turn: a model call ends before it runs out.
    pub wall_clock_per_turn: Duration,
    /// The process's carriers, told whom the agent's replies woke (weak: the controller owns
    /// the sandboxes, not the other way round; a dangling handle schedules nobody).
    pub carriers: Weak<dyn Carriers>,
    /// The sandbox's MCP client (`tools`).
    pub tools: crate::tools::Toolbox,
    /// The writes an activation's `resume` holds for the activation's end (see [`Journal`]);
    /// shared with the sandbox's HTTP egress, which records them before a request goes out.
    pub journal: Arc<Journal>,
    /// Set when the store refused this sandbox's spend because another host carries the agent
    /// now (a takeover, a move): the guest is stopped and its run ends `cancelled`, recording
    /// nothing more for the agent here.
    pub lost: Option<String>,
}

impl AgentCtx {
    /// Runs `f` on the database under the host's lock policy, then waits as long as it held
    /// the lock, adding the time spent (lock wait and that pause included) to
    /// [`store_time`](Self::store_time).
    ///
    /// This is the guests' fair share of the database. Its locks are not FIFO: a guest looping
    /// on a host call gives its connection back and takes it straight back (or another looping
    /// guest does) before the thread it woke runs, starving every other client — measured with
    /// one shared connection: one `get_status` waiting 0.3 to 0.9 s behind sixteen guests
    /// looping on `inbox` and the like. So guests take one of [`guest_seats`] seats first
    /// (`GUEST_GATE`): the rest of the pool stays free for everyone else; and each guest then
    /// pauses as long as it held its connection, so it holds one at most half of its time in
    /// host calls and a woken waiter gets it meanwhile. The pause counts against the turn's wall clock like any host work. A turn's
    /// first [`UNPACED_STORE_CALLS_PER_TURN`] calls do not pause, so an honest turn (a burst of
    /// 64 replies and their consumes) runs at full speed; only a guest looping past that is
    /// paced.
    ///
    /// A turn runs as a task on the runtime: a wait for a seat, and the pause, are
    /// [`blocking`](crate::shared_store::blocking) (the worker hands the runtime's other tasks
    /// to another thread first); the call itself runs in place, as short as a statement.
    pub fn db<R>(&self, f: impl FnOnce(&mut ahp_store::Store) -> R) -> R {
        let started = Instant::now();
        let (result, held) = {
            let seats = guest_seats(self.db.size());
            let _seat = GUEST_GATE
                .try_seat(seats)
                .unwrap_or_else(|| crate::shared_store::blocking(|| GUEST_GATE.seat(seats)));
            let mut db = self.db.locked();
            let acquired = Instant::now();
            let result = f(&mut db);
            (result, acquired.elapsed())
        };
        let calls = self.store_calls.get().saturating_add(1);
        self.store_calls.set(calls);
        if calls > UNPACED_STORE_CALLS_PER_TURN {
            crate::shared_store::blocking(|| std::thread::sleep(held));
        }
        self.store_time.set(self.store_time.get() + started.elapsed());
        result
    }

    /// Starts a new turn's per-turn accounting.
    pub fn start_turn(&mut self, turn: Option<TurnCtx>) {
        self.calls = TurnCalls::default();
        self.store_time.set(Duration::ZERO);
        self.store_calls.set(0);
        self.turn_started = Instant::now();
        self.tools.start_turn();
        self.consumed.clear();
        self.read.clear();
        self.turn = turn;
    }

    /// What the turn did with its inbox that is not recorded yet, taken for its end.
    pub(crate) fn take_held_inbox(&mut self) -> HeldInbox {
        HeldInbox {
            consumed: std::mem::take(&mut self.consumed),
            read: std::mem::take(&mut self.read).into_iter().map(|(id, _)| id).collect(),
        }
    }
}

/// What a conversation turn did with its inbox that the host holds for the turn's end.
#[derive(Debug, Clone, Default)]
pub(crate) struct HeldInbox {
    /// Queued deliveries the turn consumed since its last reply (a reply records the ones
    /// before it).
    pub consumed: Vec<String>,
    /// Queued deliveries the turn's inbox reads returned, each once, at most
    /// [`MAX_TURN_CONSUMES`](ahp_store::conversation::bounds::MAX_TURN_CONSUMES): those
    /// still queued at the end count one more try.
    pub read: Vec<String>,
}

impl HeldInbox {
    /// The store's view of it.
    pub(crate) fn as_turn_inbox(&self) -> ahp_store::conversation::TurnInbox<'_> {
        ahp_store::conversation::TurnInbox {
            consumed: &self.consumed,
            read: &self.read,
        }
    }
}

/// Store data that carries an [`AgentCtx`].
pub trait AgentView: Send + 'static {
    /// The sandbox's agent context.
    fn agent(&mut self) -> &mut AgentCtx;
}

/// Store data whose CPU meter the `metering` interface settles: only the Store knows the fuel
/// burnt, so these take the Store context.
pub trait Metered: AgentView + Sized {
    /// Charges the fuel burnt since the last settlement and cuts the fuel left to what the
    /// remaining budget pays for.
    ///
    /// # Errors
    ///
    /// If the Store refuses the new fuel level.
    fn settle(cx: &mut StoreContextMut<'_, Self>) -> wasmtime::Result<()>;

    /// Records that the budget now has `remaining` micro-USD left after spend the guest
    /// reported, cutting the fuel left to match.
    ///
    /// # Errors
    ///
    /// If the Store refuses the new fuel level.
    fn external_spend(cx: &mut StoreContextMut<'_, Self>, remaining: u64) -> wasmtime::Result<()>;
}

#[cfg(test)]
pub(crate) mod test_support {
    //! An `AgentCtx` for a real provisioned transfer, for the interfaces' unit tests.

    use super::*;
    use ahp_store::{
        DEFAULT_TOKEN_TTL, McpServer, Message, SnapshotInput, Store, Tier, TokenKey, TokenScope, issue_transfer_token,
    };

    pub(crate) fn state(messages: usize, tier: Tier) -> (AgentCtx, tempfile::TempDir) {
        state_in(messages, tier, false)
    }

    /// [`state`] for a transfer whose activation is in progress (pushed, `begin_activation`).
    pub(crate) fn activating(tier: Tier) -> (AgentCtx, tempfile::TempDir) {
        state_in(0, tier, true)
    }

    fn state_in(messages: usize, tier: Tier, activating: bool) -> (AgentCtx, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let key = TokenKey::random();
        let mut db = Store::open_in_memory().unwrap().with_token_key(key.clone());
        let snap = SnapshotInput {
            source_host: "laptop".into(),
            system_prompt: "p".into(),
            message_history: (0..messages)
                .map(|i| Message {
                    role: "user".into(),
                    content: format!("m{i}"),
                })
                .collect(),
            tool_state: serde_json::json!({ "k": 1 }),
            mcp_config: vec![McpServer {
                server: "https://inventory.example.com/mcp".into(),
                cred_ref: "inventory-api".into(),
            }],
        };
        let t = db.snapshot_state(&snap).unwrap();
        let tok = issue_transfer_token(&key, &t.id, TokenScope::ProvisionRuntime, db.now(), DEFAULT_TOKEN_TTL).unwrap();
        db.provision_runtime(&t.id, tier, 1_000, "forecaster", &tok).unwrap();
        if activating {
            db.push_state(&t.id, None).unwrap();
            let tok = issue_transfer_token(&key, &t.id, TokenScope::Activate, db.now(), DEFAULT_TOKEN_TTL).unwrap();
            db.begin_activation(&t.id, &tok).unwrap();
        }
        let vault = crate::vault::DirVault::open(dir.path().join("vault")).unwrap();
        // The operator binds (and reveals) inventory-api to the inventory server, and binds
        // `unrevealed` to another server the snapshot does not list.
        let policy: crate::policy::Policy = serde_json::from_value(serde_json::json!({ "servers": [
            { "server": "https://inventory.example.com",
              "credential": { "credRef": "inventory-api", "reveal": true } },
            { "server": "https://other.example.com",
              "credential": { "credRef": "unrevealed", "reveal": true } },
        ]}))
        .unwrap();
        let grants = Arc::new(policy.grants(&snap.mcp_config));
        let mcp_config = snap.mcp_config.clone();
        let db = crate::shared_store::share(db);
        let state = AgentCtx {
            journal: Arc::new(Journal::new(db.clone(), t.id.clone())),
            lost: None,
            transfer: t.id.clone(),
            snapshot: Arc::new(snap),
            grants: grants.clone(),
            checkpoint_bytes: tier.limits().checkpoint_bytes,
            db,
            vault: Arc::new(vault),
            calls: TurnCalls::default(),
            turn: None,
            consumed: Vec::new(),
            read: Vec::new(),
            store_time: Cell::new(Duration::ZERO),
            store_calls: Cell::new(0),
            turn_started: Instant::now(),
            wall_clock_per_turn: tier.limits().wall_clock_per_turn,
            carriers: Weak::<crate::carrier::NoCarriers>::new(),
            tools: crate::tools::Toolbox::new(
                t.id.clone(),
                &mcp_config,
                grants.clone(),
                Arc::new(crate::egress::EgressMeter::new(tier.limits().egress_bytes)),
                None,
                tier.limits().wall_clock_per_turn,
            ),
        };
        (state, dir)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn no_more_guests_than_seats_are_in_the_database_at_once() {
        let gate = GuestGate {
            taken: std::sync::Mutex::new(0),
            freed: std::sync::Condvar::new(),
        };
        let (inside, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..4 * GUEST_SEATS {
                s.spawn(|| {
                    for _ in 0..20 {
                        let _seat = gate.seat(GUEST_SEATS);
                        let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(200));
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert!(most.load(Ordering::SeqCst) <= GUEST_SEATS);
        assert!(most.load(Ordering::SeqCst) > 1, "guests share the database");
        assert_eq!(*gate.taken.locked(), 0, "every seat was given back");
    }

    #[test]
    fn a_host_on_one_connection_lets_one_guest_at_a_time_at_it() {
        assert_eq!(guest_seats(1), 1);
        assert_eq!(guest_seats(0), 1);
        assert_eq!(guest_seats(8), 4);
        assert_eq!(GUEST_SEATS, 4);
    }
}
