//! No silent death of an agent: a paid, `active` transferred agent keeps answering through
//! every transient store fault at every step of its turns, a failed bind, a restart, a release
//! mid-turn and a failed budget read — and a wake a fault met always ends in a state a person
//! can see (pending again, `delivery_unknown`, or consumed), never `claimed` or `dispatched`
//! forever.
//!
//! The faults are the store's test seam (`Store::inject_transient_fault`): a named step fails
//! with SQLite's own `SQLITE_BUSY`, raised inside the real statement. Each test drives a
//! `turn-prober` agent (it answers `echo: <body>` to every queued message) the way the
//! controller's workers do, calling `Agents::drive` directly.
//!
//! - `claim`, `fence`, `reply`, `finish`, `finish_and_its_fallback`, `lease`, `budget_read`,
//!   `budget_read_inside_the_turn`: one fault per step of a turn;
//! - `an_unresolved_dispatch_in_the_way_is_settled`: a claim refused by a dispatch whose end
//!   was never recorded;
//! - `finish_carries_the_turn_s_spend_and_an_unrecorded_one_stays_owed`,
//!   `a_turn_end_whose_answer_was_lost_charges_its_spend_once`,
//!   `an_owed_spend_is_subtracted_from_the_next_turn_s_fuel`: a turn's last compute spend is
//!   charged exactly once, and what is owed is never granted as fuel again;
//! - `leases`: renewed only when less than half is left;
//! - `the_tick_schedules_only_agents_with_wakes`;
//! - `a_failed_first_bind_is_repaired_by_the_tick`, `…_by_a_restart`;
//! - `a_sandbox_released_mid_turn_is_not_kept`;
//! - `a_kill_at_each_step_of_a_turn_never_answers_a_message_twice`: exactly once across a crash.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_guests as guests;
use ahp_host::agents::{Agents, CARRIER_LEASE};
use ahp_host::host::HostBuilder;
use ahp_host::sandbox::{RunOutcome, Sandboxes};
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT};
use ahp_host::store::fault::FaultStep;
use ahp_host::store::{Clock, EventKind, ManualClock, Store, Tier, Timestamp, TokenKey, TransferStatus};
use ahp_host::testing;
use serde_json::json;

/// Busy attempts per failure the host sees: the store's write path retries a write step; the
/// one read step (`BudgetRead`) is not retried.
fn attempts(step: FaultStep) -> u32 {
    match step {
        FaultStep::BudgetRead => 1,
        _ => ahp_host::store::MAX_WRITE_ATTEMPTS,
    }
}

/// A host carrying turn-prober agents, on a manual clock (turns still run on real time).
struct World {
    dir: tempfile::TempDir,
    key: TokenKey,
    clock: ManualClock,
    host: ahp_host::host::Host,
    posts: std::cell::Cell<u32>,
}

/// One agent the world carries, and the operator's conversation with it.
struct Agent {
    transfer: String,
    id: String,
    cv: String,
}

fn operator() -> Caller {
    Caller::full(OPERATOR_SUBJECT).unwrap()
}

/// A host over the database file `db` of `dir` (created if needed).
fn host_over(dir: &Path, key: &TokenKey, clock: &ManualClock) -> ahp_host::host::Host {
    let store = Store::open(dir.join("ahp.db"))
        .unwrap()
        .with_token_key(key.clone())
        .with_clock(Arc::new(clock.clone()));
    let data_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox-cache");
    let host = HostBuilder::new(store, data_dir)
        .engine(|e| e.max_live_sandboxes = 16)
        .vault(Arc::new(ahp_host::vault::DirVault::open(dir.join("vault")).unwrap()))
        .build()
        .unwrap();
    host.sandboxes()
        .register_component_file(guests::TURN_PROBER, Some("turn-prober"))
        .unwrap();
    host
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    let clock = ManualClock::new(Timestamp::from_micros(1_800_000_000_000_000));
    let host = host_over(dir.path(), &key, &clock);
    World {
        dir,
        key,
        clock,
        host,
        posts: std::cell::Cell::new(0),
    }
}

impl World {
    /// The host's database.
    fn db(&self) -> ahp_store::PooledStore<'_> {
        self.host.store().locked()
    }

    fn sandboxes(&self) -> &Arc<Sandboxes> {
        self.host.sandboxes()
    }

    fn agents(&self) -> &Arc<Agents> {
        self.host.agents()
    }

    /// Arms `step` on the host's store: `pass` calls through, then `fail` failures the host
    /// sees. A write step is retried by the store's write path up to `MAX_WRITE_ATTEMPTS` times
    /// before its caller sees it busy, so one failure the host sees is that many busy attempts.
    fn fault(&self, step: FaultStep, pass: u32, fail: u32) {
        self.db()
            .inject_transient_fault(step, pass, fail * attempts(step))
            .unwrap();
    }

    /// How many failures of `step` the host has seen.
    fn fired(&self, step: FaultStep) -> u32 {
        let fired = self.db().faults_fired(step);
        assert_eq!(fired % attempts(step), 0, "{step:?} fired {fired} times");
        fired / attempts(step)
    }

    /// A pushed turn-prober transfer with a roomy budget.
    fn pushed(&self) -> String {
        self.pushed_at(Tier::Nano)
    }

    fn pushed_at(&self, tier: Tier) -> String {
        let snap = testing::snapshot(0, json!({}));
        testing::pushed(&mut self.db(), &self.key, &snap, tier, 1_000_000, "turn-prober").unwrap()
    }

    /// Activates `transfer` on this world's host; returns how it went.
    fn activate(&self, transfer: &str) -> ahp_host::sandbox::RunReport {
        let tok = testing::activate_token(&self.db(), &self.key, transfer).unwrap();
        self.host.activate(transfer, &tok).unwrap()
    }

    /// A conversation of the operator with the agent of the bound `transfer`.
    fn conversation(&self, transfer: &str) -> Agent {
        let id = self.db().transfer(transfer).unwrap().agent_id.expect("bound");
        let new = NewConversation {
            title: "questions".into(),
            agents: vec![id.clone()],
        };
        let cv = self
            .db()
            .create_conversation(&operator(), &new, &format!("cv-{transfer}"))
            .unwrap()
            .value
            .id;
        Agent {
            transfer: transfer.to_owned(),
            id,
            cv,
        }
    }

    /// An active, carried turn-prober agent and a conversation with it.
    fn agent(&self) -> Agent {
        self.agent_at(Tier::Nano)
    }

    fn agent_at(&self, tier: Tier) -> Agent {
        let t = self.pushed_at(tier);
        assert_eq!(self.activate(&t).outcome, RunOutcome::Returned);
        let a = self.conversation(&t);
        assert!(self.agents().carrier(&a.id).is_some(), "carried from its activation");
        a
    }

    /// Posts `body` to `a`'s conversation as the operator; returns the message id.
    fn post(&self, a: &Agent, body: &str) -> String {
        self.posts.set(self.posts.get() + 1);
        let new = NewMessage {
            conversation: a.cv.clone(),
            acting: Acting::Human,
            body: body.to_owned(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("post-{}", self.posts.get())),
        };
        self.db().post_message(&operator(), &new).unwrap().value.id
    }

    /// The bodies of the agent's messages in `a`'s conversation, in order.
    fn replies(&self, a: &Agent) -> Vec<String> {
        self.db()
            .read_transcript(&operator(), &Acting::Human, &a.cv, 0, 200)
            .unwrap()
            .into_iter()
            .filter(|m| m.body.starts_with("echo: ") || m.body == "replied")
            .map(|m| m.body)
            .collect()
    }

    /// Every wake of `a`'s agent, oldest first, with the states of its attempts.
    fn wakes(&self, a: &Agent) -> Vec<(String, Vec<String>)> {
        let mut db = self.db();
        let conn = db.connection();
        let wakes: Vec<(String, String)> = conn
            .prepare("SELECT id, state FROM wakes WHERE agent_id = ?1 ORDER BY created_at, rowid")
            .unwrap()
            .query_map([&a.id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        wakes
            .into_iter()
            .map(|(id, state)| {
                let attempts: Vec<String> = conn
                    .prepare("SELECT state FROM wake_attempts WHERE wake_id = ?1 ORDER BY claimed_at, rowid")
                    .unwrap()
                    .query_map([&id], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                (state, attempts)
            })
            .collect()
    }

    /// No wake of `a`'s agent is stuck: each is pending, or consumed, or past the fence with
    /// its outcome settled (`delivery_unknown`); none `claimed`, none with an attempt left
    /// `claimed`, `dispatched` or `accepted`.
    fn assert_no_stuck_wake(&self, a: &Agent) {
        for (state, attempts) in self.wakes(a) {
            assert_ne!(state, "claimed", "{:?}", self.wakes(a));
            for at in &attempts {
                assert!(
                    ["released", "delivery_unknown", "consumed"].contains(&at.as_str()),
                    "an attempt is left {at}: {:?}",
                    self.wakes(a)
                );
            }
        }
    }

    /// The agent is still carried and its transfer active.
    fn assert_carried(&self, a: &Agent) {
        assert!(self.agents().carrier(&a.id).is_some(), "the carrier is kept");
        let t = self.db().transfer(&a.transfer).unwrap();
        assert_eq!(t.status, TransferStatus::Active, "{:?}", t.status);
    }

    /// Drives `a` until an opportunity runs no more turns (at most a few), as the workers do
    /// when they reschedule an agent after a transient failure.
    fn drive_until_idle(&self, a: &Agent) {
        for _ in 0..4 {
            let d = self.agents().drive(&a.id).unwrap();
            if d.consumed == 0 && d.unknown == 0 && !d.retry {
                return;
            }
        }
    }

    /// The next message is answered: posts `echo <tag>` and drives; the reply is there.
    fn assert_answers_the_next_message(&self, a: &Agent, tag: &str) {
        self.post(a, &format!("echo {tag}"));
        self.drive_until_idle(a);
        let want = format!("echo: echo {tag}");
        assert!(self.replies(a).contains(&want), "{want} not in {:?}", self.replies(a));
        self.assert_no_stuck_wake(a);
        self.assert_carried(a);
    }
}

#[test]
fn claim() {
    let w = world();
    let a = w.agent();
    w.fault(FaultStep::ClaimWake, 0, 1);
    w.post(&a, "echo one");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(w.fired(FaultStep::ClaimWake), 1);
    assert!(d.retry && d.consumed == 0, "{d:?}");
    w.assert_carried(&a);
    assert_eq!(
        w.wakes(&a),
        [("pending".to_owned(), vec![])],
        "the wake waits, unclaimed"
    );
    w.assert_answers_the_next_message(&a, "two");
    assert_eq!(
        w.replies(&a),
        ["echo: echo one", "echo: echo two"],
        "both answered once"
    );
}

#[test]
fn fence() {
    let w = world();
    let a = w.agent();
    w.fault(FaultStep::Dispatch, 0, 1);
    w.post(&a, "echo one");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(w.fired(FaultStep::Dispatch), 1);
    assert!(d.retry, "{d:?}");
    w.assert_carried(&a);
    assert_eq!(
        w.wakes(&a),
        [("pending".to_owned(), vec![])],
        "claim and fence are one commit: the failed fence leaves the wake pending, unclaimed"
    );
    w.assert_answers_the_next_message(&a, "two");
    assert_eq!(w.replies(&a), ["echo: echo one", "echo: echo two"]);
}

#[test]
fn reply() {
    let w = world();
    let a = w.agent();
    w.fault(FaultStep::AgentReply, 0, 1);
    w.post(&a, "echo one");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(w.fired(FaultStep::AgentReply), 1);
    assert_eq!(d.unknown, 1, "the guest's turn failed on its reply: {d:?}");
    w.assert_carried(&a);
    assert_eq!(
        w.wakes(&a),
        [("dispatched".to_owned(), vec!["delivery_unknown".to_owned()])]
    );
    // The unanswered message is still queued: the next turn answers both.
    w.assert_answers_the_next_message(&a, "two");
    assert_eq!(w.replies(&a), ["echo: echo one", "echo: echo two"]);
}

#[test]
fn finish() {
    let w = world();
    let a = w.agent();
    // Once: the end of the turn is retried in place and recorded.
    w.fault(FaultStep::FinishTurn, 0, 1);
    w.post(&a, "echo one");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(w.fired(FaultStep::FinishTurn), 1);
    assert_eq!(d.consumed, 1, "{d:?}");
    assert_eq!(w.wakes(&a), [("consumed".to_owned(), vec!["consumed".to_owned()])]);
    // Every in-place retry: the turn ran (it replied) but its consume is not recorded, so the
    // wake is `delivery_unknown` — never left dispatched.
    w.fault(FaultStep::FinishTurn, 0, ahp_host::agents::recovery::IN_PLACE_ATTEMPTS);
    w.post(&a, "echo two");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(
        w.fired(FaultStep::FinishTurn),
        1 + ahp_host::agents::recovery::IN_PLACE_ATTEMPTS
    );
    assert_eq!((d.consumed, d.retry), (0, false), "{d:?}");
    assert_eq!(
        w.wakes(&a)[1],
        ("dispatched".to_owned(), vec!["delivery_unknown".to_owned()])
    );
    w.assert_no_stuck_wake(&a);
    w.assert_answers_the_next_message(&a, "three");
    assert_eq!(w.replies(&a), ["echo: echo one", "echo: echo two", "echo: echo three"]);
}

#[test]
fn finish_and_its_fallback() {
    let w = world();
    let a = w.agent();
    let n = ahp_host::agents::recovery::IN_PLACE_ATTEMPTS;
    w.fault(FaultStep::FinishTurn, 0, n);
    w.fault(FaultStep::MarkUnknown, 0, n);
    w.post(&a, "echo one");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(
        (w.fired(FaultStep::FinishTurn), w.fired(FaultStep::MarkUnknown)),
        (n, n)
    );
    assert!(d.retry, "nothing could be recorded: the agent is rescheduled: {d:?}");
    w.assert_carried(&a);
    // The next opportunity (the reschedule, or the tick's) settles it first.
    let d = w.agents().drive(&a.id).unwrap();
    assert!(!d.retry, "{d:?}");
    assert_eq!(
        w.wakes(&a),
        [("dispatched".to_owned(), vec!["delivery_unknown".to_owned()])]
    );
    w.assert_answers_the_next_message(&a, "two");
}

/// The last compute spend of a turn goes with the turn's end (one commit), and a spend whose
/// end could not be recorded stays owed: the sandbox's next settlement charges it. Either way
/// the transfer pays exactly the price of the fuel its sandbox burnt — never less, never twice.
#[test]
fn finish_carries_the_turn_s_spend_and_an_unrecorded_one_stays_owed() {
    // The large tier's price and a turn of a few million rounds on the CPU: each turn costs a
    // few micro-USD and none reaches the meter's quantum, so each turn's whole compute spend is
    // its last settlement.
    const TURN: &str = "burn 2000000";
    let w = world();
    let t = w.pushed_at(Tier::Large);
    let activation = w.activate(&t);
    assert_eq!(activation.outcome, RunOutcome::Returned);
    let a = w.conversation(&t);
    let spent = || w.db().budget(&a.transfer).unwrap().unwrap().spent_micro_usd;
    let compute_events = || {
        let status = w.db().get_status(&a.transfer).unwrap();
        status
            .events
            .iter()
            .filter(|e| e.kind == EventKind::UsageReported && e.detail["kind"] == "compute")
            .count()
    };
    let price = |fuel: u64| Tier::Large.limits().compute_cost_micro_usd(fuel);
    let mut fuel = activation.fuel_consumed;
    assert_eq!(spent(), price(fuel));

    // A turn that returned: its spend is recorded with its end, one usage event for the turn.
    let events = compute_events();
    w.post(&a, TURN);
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(d.consumed, 1, "{d:?}");
    fuel += d.fuel_consumed;
    assert!(
        price(fuel) > price(activation.fuel_consumed) + 1,
        "the turn burnt a priced amount: {} fuel",
        d.fuel_consumed
    );
    assert!(d.fuel_consumed < ahp_host::sandbox::METER_QUANTUM_FUEL);
    assert_eq!(spent(), price(fuel));
    assert_eq!(compute_events(), events + 1);

    // Nothing of its end recorded (the consume and the fallback both fail): the spend stays
    // owed, and the next turn's settlement charges it with its own.
    let n = ahp_host::agents::recovery::IN_PLACE_ATTEMPTS;
    w.fault(FaultStep::FinishTurn, 0, n);
    w.fault(FaultStep::MarkUnknown, 0, n);
    let before = spent();
    w.post(&a, TURN);
    let d = w.agents().drive(&a.id).unwrap();
    assert!(d.retry, "{d:?}");
    fuel += d.fuel_consumed;
    assert_eq!(spent(), before, "not recorded with an end that was not recorded");
    // The next opportunity settles the unrecorded end; then a message is answered.
    let d = w.agents().drive(&a.id).unwrap();
    fuel += d.fuel_consumed;
    w.post(&a, TURN);
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(d.consumed, 1, "{d:?}");
    fuel += d.fuel_consumed;
    assert_eq!(spent(), price(fuel), "the owed spend was charged, once");
    assert_eq!(w.replies(&a).len(), 0);
    let replies = w
        .db()
        .read_transcript(&operator(), &Acting::Human, &a.cv, 0, 200)
        .unwrap()
        .into_iter()
        .filter(|m| m.body == "burnt 2000000 rounds")
        .count();
    assert_eq!(replies, 3, "every turn ran whole");
}

/// A turn end that committed though the host was told it failed (its answer lost, as when
/// PostgreSQL's connection drops at `COMMIT`) is retried: the retry finds the end, and the spend
/// recorded with it, already there, and the meter counts that spend as recorded — it is not
/// kept owed and charged again at the next settlement.
#[test]
fn a_turn_end_whose_answer_was_lost_charges_its_spend_once() {
    const TURN: &str = "burn 2000000";
    let w = world();
    let t = w.pushed_at(Tier::Large);
    let activation = w.activate(&t);
    assert_eq!(activation.outcome, RunOutcome::Returned);
    let a = w.conversation(&t);
    let spent = || w.db().budget(&a.transfer).unwrap().unwrap().spent_micro_usd;
    let price = |fuel: u64| Tier::Large.limits().compute_cost_micro_usd(fuel);
    let mut fuel = activation.fuel_consumed;

    w.fault(FaultStep::FinishTurnAnswer, 0, 1);
    w.post(&a, TURN);
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(w.fired(FaultStep::FinishTurnAnswer), 1);
    assert_eq!((d.consumed, d.retry), (1, false), "{d:?}");
    fuel += d.fuel_consumed;
    assert!(price(fuel) > price(activation.fuel_consumed) + 1);
    assert_eq!(spent(), price(fuel));
    // The next turn's settlements charge its own fuel only.
    w.post(&a, TURN);
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(d.consumed, 1, "{d:?}");
    fuel += d.fuel_consumed;
    assert_eq!(spent(), price(fuel), "the first turn's spend was charged once");
}

/// Spend still owed from a turn end that could not be recorded is paid from the budget before
/// the next turn gets its fuel: a guest that burns every unit it is given does not take the
/// transfer past its allocation by what was owed.
#[test]
fn an_owed_spend_is_subtracted_from_the_next_turn_s_fuel() {
    const ALLOCATION: u64 = 1_000;
    let w = world();
    let snap = testing::snapshot(0, json!({}));
    let t = testing::pushed(&mut w.db(), &w.key, &snap, Tier::Large, ALLOCATION, "turn-prober").unwrap();
    assert_eq!(w.activate(&t).outcome, RunOutcome::Returned);
    let a = w.conversation(&t);
    let spent = || w.db().budget(&a.transfer).unwrap().unwrap().spent_micro_usd;

    // A turn whose end is not recorded at all: its spend stays owed in the meter.
    let n = ahp_host::agents::recovery::IN_PLACE_ATTEMPTS;
    w.fault(FaultStep::FinishTurn, 0, n);
    w.fault(FaultStep::MarkUnknown, 0, n);
    let before = spent();
    let burn = w.post(&a, "burn 2000000");
    let d = w.agents().drive(&a.id).unwrap();
    assert!(d.retry, "{d:?}");
    let owed = Tier::Large.limits().compute_cost_micro_usd(d.fuel_consumed);
    assert!(owed >= 2, "a priced turn: {owed} micro-USD");
    assert_eq!(spent(), before, "owed, not recorded");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!((d.consumed, d.fuel_consumed), (0, 0), "only the settlement: {d:?}");
    // (The prober leaves what it burnt for queued: handled, so that the next turn spins.)
    let c = w.agents().carrier(&a.id).unwrap();
    w.db().consume_deliveries(&c.caller, &c.actor, &[burn]).unwrap();

    // Everything else spent but a little more than is owed; then a turn that burns all it gets.
    let left = owed + 10;
    let now_spent = spent();
    w.db()
        .report_usage(&a.transfer, ALLOCATION - now_spent - left, "tool_calls")
        .unwrap();
    w.post(&a, "spin");
    let d = w.agents().drive(&a.id).unwrap();
    assert!(d.fuel_consumed > 0, "{d:?}");
    assert!(
        spent() <= ALLOCATION + 1,
        "spent {} of {ALLOCATION}: the owed {owed} was granted as fuel again",
        spent()
    );
    assert!(
        spent() >= ALLOCATION - 1,
        "the spin burnt what it was given: {}",
        spent()
    );
}

#[test]
fn an_unresolved_dispatch_in_the_way_is_settled() {
    let w = world();
    let a = w.agent();
    let c = w.agents().carrier(&a.id).unwrap();
    // A dispatch through the agent's endpoint whose end was never recorded (as a process that
    // lost it would leave it): the next claim is refused by the unresolved-dispatch bound.
    w.post(&a, "echo one");
    {
        let mut db = w.db();
        let claim = db
            .claim_wake(&c.caller, &c.actor, Duration::from_secs(60))
            .unwrap()
            .unwrap();
        db.prepare_dispatch(&c.caller, &c.actor, &claim.attempt.id).unwrap();
    }
    w.post(&a, "echo two");
    w.drive_until_idle(&a);
    w.assert_carried(&a);
    let wakes = w.wakes(&a);
    assert_eq!(
        wakes[0],
        ("dispatched".to_owned(), vec!["delivery_unknown".to_owned()]),
        "{wakes:?}"
    );
    assert!(
        w.replies(&a).contains(&"echo: echo two".to_owned()),
        "{:?}",
        w.replies(&a)
    );
    w.assert_answers_the_next_message(&a, "three");
}

#[test]
fn leases() {
    let w = world();
    let a = w.agent();
    let lease = |w: &World| {
        let c = w.agents().carrier(&a.id).unwrap();
        w.db()
            .get_endpoint(&operator(), &a.id, &c.actor.endpoint)
            .unwrap()
            .lease_expires_at
    };
    let first = lease(&w);
    // A lease with more than half left is not written again.
    w.clock.advance(CARRIER_LEASE / 4);
    w.agents().renew_leases();
    assert_eq!(lease(&w), first);
    // Less than half left: renewed from now.
    w.clock.advance(CARRIER_LEASE / 4 + Duration::from_secs(1));
    w.agents().renew_leases();
    assert_eq!(lease(&w), w.clock.now().saturating_add(CARRIER_LEASE));
    assert_eq!(w.agents().carrier(&a.id).unwrap().lease_expires_at, lease(&w));
}

/// The tick's sweep drops exactly the carriers whose transfer ended behind the host's back
/// (as `ahp transfer terminate` from another process ends it), asking the store in batches.
#[test]
fn sweep() {
    let w = world();
    let kept = w.agent();
    let ended = w.agent();
    w.db().terminate(&ended.transfer, "operator ended it").unwrap();
    assert_eq!(w.agents().sweep().unwrap(), vec![ended.transfer.clone()]);
    assert!(w.agents().carrier(&ended.id).is_none());
    assert!(!w.host.sandboxes().is_live(&ended.transfer), "its sandbox is dropped");
    w.assert_carried(&kept);
    assert!(w.agents().sweep().unwrap().is_empty(), "nothing else ended");
    w.assert_answers_the_next_message(&kept, "one");
}

/// A carrier the bulk renewal passes over — its endpoint replaced meanwhile (a re-bind, as a
/// takeover's) — is renewed alone, which finds the endpoint gone and drops it; the others are
/// renewed in bulk.
#[test]
fn lease_of_an_endpoint_the_bulk_renewal_passes_over() {
    let w = world();
    let kept = w.agent();
    let taken = w.agent();
    w.db().bind_transfer_agent(&taken.transfer, CARRIER_LEASE).unwrap();
    w.clock.advance(CARRIER_LEASE / 2 + Duration::from_secs(60));
    w.agents().renew_leases();
    assert!(w.agents().carrier(&taken.id).is_none(), "its endpoint was replaced");
    let renewed = w.agents().carrier(&kept.id).unwrap().lease_expires_at;
    assert_eq!(renewed, w.clock.now().saturating_add(CARRIER_LEASE));
    w.assert_answers_the_next_message(&kept, "one");
}

#[test]
fn lease() {
    let w = world();
    let a = w.agent();
    w.clock.advance(CARRIER_LEASE / 2 + Duration::from_secs(60));
    let before = w.agents().carrier(&a.id).unwrap().lease_expires_at;
    w.fault(FaultStep::RenewLease, 0, 1);
    w.agents().renew_leases();
    assert_eq!(w.fired(FaultStep::RenewLease), 1);
    w.assert_carried(&a);
    w.assert_answers_the_next_message(&a, "one");
    // The next tick renews it.
    w.agents().renew_leases();
    let after = w.agents().carrier(&a.id).unwrap().lease_expires_at;
    assert!(after > before, "{after:?} > {before:?}");
}

#[test]
fn budget_read() {
    let w = world();
    let a = w.agent();
    w.fault(FaultStep::BudgetRead, 0, 1);
    w.post(&a, "echo one");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(w.fired(FaultStep::BudgetRead), 1);
    assert!(d.retry, "{d:?}");
    w.assert_carried(&a);
    assert_eq!(w.wakes(&a), [("pending".to_owned(), vec![])], "nothing was claimed");
    w.assert_answers_the_next_message(&a, "two");
    assert_eq!(w.replies(&a), ["echo: echo one", "echo: echo two"]);
}

#[test]
fn budget_read_inside_the_turn() {
    let w = world();
    let a = w.agent();
    // The controller's read passes; the turn's own read fails: it starts from the controller's.
    w.fault(FaultStep::BudgetRead, 1, 1);
    w.post(&a, "echo one");
    let d = w.agents().drive(&a.id).unwrap();
    assert_eq!(w.fired(FaultStep::BudgetRead), 1);
    assert_eq!(d.consumed, 1, "{d:?}");
    w.assert_carried(&a);
    assert_eq!(w.replies(&a), ["echo: echo one"]);
}

#[test]
fn the_tick_schedules_only_agents_with_wakes() {
    let w = world();
    let quiet = w.agent();
    let busy = w.agent();
    // No workers run here: the activations queued both; take them.
    let mut queued = w.agents().drain_queue();
    queued.sort();
    let mut both = vec![quiet.id.clone(), busy.id.clone()];
    both.sort();
    assert_eq!(queued, both);
    w.post(&busy, "echo one");
    w.agents().schedule_all();
    assert_eq!(
        w.agents().drain_queue(),
        std::slice::from_ref(&busy.id),
        "only the agent with a wake"
    );
    // Once it is answered, the tick queues nobody.
    w.agents().drive(&busy.id).unwrap();
    w.agents().schedule_all();
    assert!(w.agents().drain_queue().is_empty());
}

#[test]
fn a_failed_first_bind_is_repaired_by_the_tick() {
    let w = world();
    let t = w.pushed();
    // Every attempt of the bind's write fails — both binds: the one in the completing commit
    // (the activation then completes alone) and the one after it: active with no agent.
    w.fault(FaultStep::AttachEndpoint, 0, 2);
    let report = w.activate(&t);
    assert_eq!(report.outcome, RunOutcome::Returned);
    assert_eq!(report.transfer.status, TransferStatus::Active);
    assert_eq!(w.db().transfer(&t).unwrap().agent_id, None);
    assert_eq!(w.sandboxes().live_count(), 0, "its sandbox is not kept unbound");
    // The next reaper tick binds it.
    assert_eq!(w.agents().repair_bindings().unwrap(), std::slice::from_ref(&t));
    let a = w.conversation(&t);
    w.assert_carried(&a);
    w.assert_answers_the_next_message(&a, "one");
    // Nothing left to repair.
    assert!(w.agents().repair_bindings().unwrap().is_empty());
}

#[test]
fn the_tick_s_repair_walks_the_active_transfers_a_slice_at_a_time() {
    let w = world();
    let mut ts: Vec<String> = (0..3)
        .map(|_| {
            let t = w.pushed();
            w.fault(FaultStep::AttachEndpoint, 0, 2);
            assert_eq!(w.activate(&t).transfer.status, TransferStatus::Active);
            t
        })
        .collect();
    ts.sort();
    // Two examined per tick: the first two, then the third (the end of the walk).
    assert_eq!(w.agents().repair_some_bindings(2).unwrap(), ts[..2]);
    assert_eq!(w.agents().repair_some_bindings(2).unwrap(), ts[2..]);
    // The next walk starts over and finds every one carried.
    assert!(w.agents().repair_some_bindings(2).unwrap().is_empty());
    assert!(w.agents().repair_some_bindings(2).unwrap().is_empty());
    for t in &ts {
        let a = w.conversation(t);
        w.assert_carried(&a);
    }
}

#[test]
fn a_failed_registration_is_repaired_by_the_tick() {
    let w = world();
    let t = w.pushed();
    // The registration in the completing commit and the one after the bind alone.
    w.fault(FaultStep::RegisterCarrier, 0, 2);
    let report = w.activate(&t);
    assert_eq!(report.transfer.status, TransferStatus::Active);
    let agent = w.db().transfer(&t).unwrap().agent_id.expect("bound, not registered");
    assert!(w.agents().carrier(&agent).is_none());
    assert_eq!(w.sandboxes().live_count(), 0);
    assert_eq!(w.agents().repair_bindings().unwrap(), std::slice::from_ref(&t));
    let a = w.conversation(&t);
    w.assert_answers_the_next_message(&a, "one");
}

#[test]
fn a_failed_first_bind_is_repaired_by_a_restart() {
    let w = world();
    let t = w.pushed();
    w.fault(FaultStep::AttachEndpoint, 0, 2);
    assert_eq!(w.activate(&t).transfer.status, TransferStatus::Active);
    assert_eq!(w.db().transfer(&t).unwrap().agent_id, None);
    // A successor process over the same database takes over.
    let successor = host_over(w.dir.path(), &w.key, &w.clock);
    successor.agents().take_over("interrupted").unwrap();
    let agent = successor
        .store()
        .locked()
        .transfer(&t)
        .unwrap()
        .agent_id
        .expect("bound at takeover");
    assert!(successor.agents().carrier(&agent).is_some());
    drop(w.host);
    let w = World { host: successor, ..w };
    let a = w.conversation(&t);
    w.assert_answers_the_next_message(&a, "one");
}

#[test]
fn a_sandbox_released_mid_turn_is_not_kept() {
    let w = world();
    // The small tier's wall clock leaves the sleeping turn room on a loaded machine.
    let a = w.agent_at(Tier::Small);
    assert_eq!(w.sandboxes().live_count(), 1);
    w.post(&a, "reply-then-sleep 1500");
    let agents = w.agents().clone();
    let id = a.id.clone();
    let turn = std::thread::spawn(move || agents.drive(&id).unwrap());
    // Once the turn replied (it is now sleeping), release the agent.
    let started = Instant::now();
    while !w.replies(&a).contains(&"replied".to_owned()) {
        assert!(started.elapsed() < Duration::from_secs(30), "the turn never replied");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.agents().release(&a.id);
    let d = turn.join().unwrap();
    assert_eq!(d.consumed, 1, "{d:?}");
    assert_eq!(w.sandboxes().live_count(), 0, "the released sandbox was not put back");
    assert!(w.agents().carrier(&a.id).is_none());
}

/// A host killed at each step of a turn with three messages — before its first reply, after
/// each reply, after the last one before the turn's end — never makes the agent answer a
/// message twice, and loses none: a successor host takes over, the next message wakes the
/// agent, and every message has exactly one reply. (The kill is the turn's future dropped
/// where it waits, with nothing more written for it: what the database sees of a `kill -9`.)
#[test]
fn a_kill_at_each_step_of_a_turn_never_answers_a_message_twice() {
    const STEP: u64 = 150;
    for replied in 0..=3_usize {
        let w = world();
        let a = w.agent_at(Tier::Small);
        let asked: Vec<String> = (1..=3).map(|i| w.post(&a, &format!("slowly {STEP} #{i}"))).collect();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (agents, id) = (w.agents().clone(), a.id.clone());
        let turn = runtime.spawn(async move { agents.drive_async(&id).await });
        // Kill once `replied` replies are committed (and before the next one: a step apart).
        let started = Instant::now();
        while w.replies(&a).len() < replied {
            assert!(started.elapsed() < Duration::from_secs(30), "the turn never replied");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(STEP / 3));
        turn.abort();
        assert!(runtime.block_on(turn).unwrap_err().is_cancelled());
        drop(runtime);
        assert_eq!(w.replies(&a).len(), replied, "killed between two replies");
        // A successor process over the same database takes over, and a new message comes.
        let successor = host_over(w.dir.path(), &w.key, &w.clock);
        successor.agents().take_over("killed").unwrap();
        drop(w.host);
        let w = World { host: successor, ..w };
        let last = w.post(&a, "slowly 1 #4");
        let drive = w.agents().drive(&a.id).unwrap();
        assert!(drive.failure.is_none(), "{drive:?}");
        let transcript = w
            .db()
            .read_transcript(&operator(), &Acting::Human, &a.cv, 0, 200)
            .unwrap();
        for question in asked.iter().chain([&last]) {
            let answers = transcript
                .iter()
                .filter(|m| m.reply_to.as_deref() == Some(question.as_str()))
                .count();
            assert_eq!(
                answers, 1,
                "killed after {replied} replies: {question} has {answers} answers"
            );
        }
        w.assert_no_stuck_wake(&a);
    }
}
