//! Conversation turns through the real host, beside `sandbox`:
//!
//! - `replies`: an agent's own `reply` schedules the agents it woke at once (the one post
//!   path), so one agent answers another without waiting for the reaper's tick;
//! - `bounds`: the per-turn bounds of `checkpoint.load`, `metering.budget` and
//!   `conversations.consume`, at the limit and one past it, as the guest sees them;
//! - `spin`: a call-free loop stopped by the wall clock is charged the fuel it burnt;
//! - `consumes`: a turn's consumes are checked at once and recorded in its end's commit (or,
//!   for a turn a ceiling stopped, before its transfer ends), and the turn's own inbox reads
//!   see them;
//! - `parking`: an idle agent's sandbox is parked and its next turn starts a fresh one, the
//!   least recently used are parked to make room, and a resume-only sandbox is never parked;
//! - `moves`: a move towards a host that died before the hand-over leaves the agent answering
//!   from the host that carries it;
//! - `lost_agent`: a turn whose spend the database refuses because another host carries the
//!   agent now is cancelled, and nothing more is recorded for the agent;
//! - `aliasing`: a guest passing one 16 MiB string as many aliased descriptors to every call
//!   whose arguments hold lists is refused with a typed error, its host's memory within the
//!   tier's bound, and answers its next message; a call of fixed arity past the per-call copy
//!   budget is a `host_resources` breach.

use crate::common::rss;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_guests as guests;
use ahp_host::agents::AgentsConfig;
use ahp_host::host::HostBuilder;
use ahp_host::sandbox::{
    Ceiling, CeilingCap, FUEL_FLUSH_INTERVAL, MAX_BUDGET_CALLS_PER_TURN, MAX_CONSUMES_PER_TURN, MAX_LOADS_PER_TURN,
    RunOutcome, RunReport,
};
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{
    Acting, Author, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT, TranscriptMessage,
};
use ahp_host::store::{EventKind, Store, StorePool, Tier, TokenKey, TransferStatus};
use ahp_host::testing::{self, snapshot};
use serde_json::json;

struct Host {
    _dir: tempfile::TempDir,
    key: TokenKey,
    host: ahp_host::host::Host,
    operator: Caller,
}

fn host_with(cap: CeilingCap) -> Host {
    host_with_turns(cap, None)
}

/// A host whose controller runs `running_turns` turns at once (`None`: its default).
fn host_with_turns(cap: CeilingCap, running_turns: Option<usize>) -> Host {
    host_configured(|b| b.cap(cap), running_turns)
}

/// A host built through `configure`, whose controller runs `running_turns` turns at once.
fn host_configured(configure: impl FnOnce(HostBuilder) -> HostBuilder, running_turns: Option<usize>) -> Host {
    let key = TokenKey::random();
    let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    host_over(db.into(), key, tempfile::tempdir().unwrap(), configure, running_turns)
}

/// A host on a database file whose connections share one group commit, as `ahp serve`'s do:
/// its commits can be counted.
fn host_on_a_file() -> Host {
    let key = TokenKey::random();
    let dir = tempfile::tempdir().unwrap();
    let k = key.clone();
    let pool = StorePool::open(dir.path().join("ahp.db"), 2, |s| Ok(s.with_token_key(k.clone()))).unwrap();
    host_over(pool, key, dir, |b| b, None)
}

fn host_over(
    db: StorePool,
    key: TokenKey,
    dir: tempfile::TempDir,
    configure: impl FnOnce(HostBuilder) -> HostBuilder,
    running_turns: Option<usize>,
) -> Host {
    let builder = HostBuilder::new(db, PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox-cache"));
    let host = configure(builder)
        .agents(AgentsConfig {
            running_turns,
            ..AgentsConfig::default()
        })
        .vault(Arc::new(
            ahp_host::vault::DirVault::open(dir.path().join("vault")).unwrap(),
        ))
        .build()
        .unwrap();
    let sandboxes = host.sandboxes().clone();
    for (name, path) in guests::ALL {
        sandboxes.register_component_file(path, Some(name)).unwrap();
    }
    Host {
        _dir: dir,
        key,
        host,
        operator: Caller::full(OPERATOR_SUBJECT).unwrap(),
    }
}

impl Host {
    /// The host's database.
    fn db(&self) -> ahp_store::PooledStore<'_> {
        self.host.store().locked()
    }

    /// Activates a new `component` transfer at `tier`; returns the transfer and the report.
    fn activated(&self, component: &str, tier: Tier) -> (String, RunReport) {
        let id = testing::pushed(
            &mut self.db(),
            &self.key,
            &snapshot(0, json!({})),
            tier,
            1_000_000,
            component,
        )
        .unwrap();
        let tok = testing::activate_token(&self.db(), &self.key, &id).unwrap();
        let report = self.host.activate(&id, &tok).unwrap();
        (id, report)
    }

    /// A turn-prober agent, activated and carried by this host.
    fn prober(&self) -> (String, String) {
        let (id, report) = self.activated("turn-prober", Tier::Nano);
        assert_eq!(report.outcome, RunOutcome::Returned);
        (id, report.transfer.agent_id.expect("bound at activation"))
    }

    fn conversation(&self, agents: &[&str]) -> String {
        let new = NewConversation {
            title: "turns".into(),
            agents: agents.iter().map(|a| (*a).to_owned()).collect(),
        };
        let key = format!("cv-{}", agents.join("-"));
        self.db()
            .create_conversation(&self.operator, &new, &key)
            .unwrap()
            .value
            .id
    }

    /// Posts `body` as the human, straight to the store: schedules nobody.
    fn post(&self, cv: &str, body: &str) -> String {
        let new = NewMessage {
            conversation: cv.to_owned(),
            acting: Acting::Human,
            body: body.to_owned(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(body.replace(' ', "_")),
        };
        self.db().post_message(&self.operator, &new).unwrap().value.id
    }

    fn transcript(&self, cv: &str) -> Vec<TranscriptMessage> {
        self.db()
            .read_transcript(&self.operator, &Acting::Human, cv, 0, 200)
            .unwrap()
    }

    /// Marks `message` handled in `agent`'s inbox (the prober acts on its first queued one).
    fn handled(&self, agent: &str, message: &str) {
        let carrier = self.host.agents().carrier(agent).unwrap();
        self.db()
            .consume_delivery(&carrier.caller, &carrier.actor, message)
            .unwrap();
    }

    /// Posts `body` to `agent` alone in `cv`, runs its turn, and returns its reply's body.
    fn ask(&self, agent: &str, cv: &str, body: &str) -> Option<String> {
        let question = self.post(cv, body);
        let drive = self.host.agents().drive(agent).unwrap();
        let reply = self
            .transcript(cv)
            .into_iter()
            .find(|m| m.reply_to.as_deref() == Some(&question))
            .map(|m| m.body);
        assert_eq!(drive.consumed + drive.unknown, 1, "{body}: {drive:?}");
        reply
    }
}

mod replies {
    use super::*;

    #[test]
    fn turns_waiting_in_a_host_call_hold_no_thread_and_run_all_at_once() {
        let h = host_with(CeilingCap::default());
        let n = 24;
        let agents: Vec<String> = (0..n)
            .map(|i| {
                let (_, agent) = h.prober();
                let cv = h.conversation(&[&agent]);
                h.post(&cv, &format!("reply-then-sleep {}", 1000 + i));
                agent
            })
            .collect();
        // Two workers, as on a two-core host; each turn waits a second in `wasi:io/poll`.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let controller = h.host.agents().clone();
        let started = Instant::now();
        let drives = runtime.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for agent in agents {
                let c = controller.clone();
                set.spawn(async move { c.drive_async(&agent).await.unwrap() });
            }
            set.join_all().await
        });
        let took = started.elapsed();
        assert!(drives.iter().all(|d| d.consumed == 1), "{drives:?}");
        // One at a time per thread would take 12 s; four blocking workers, 6 s.
        assert!(took < Duration::from_secs(4), "{n} one-second turns took {took:?}");
        eprintln!("{n} turns each waiting 1 s in a host call, on 2 worker threads: {took:?}");
    }

    #[test]
    fn an_agent_to_agent_reply_schedules_the_other_agent_within_one_commit() {
        // One turn at a time: the opportunities the two bindings scheduled run one after the
        // other.
        let h = host_with_turns(CeilingCap::default(), Some(1));
        let ((_, b), (_, a)) = (h.prober(), h.prober());
        let cv = h.conversation(&[&a, &b]);
        h.post(&cv, &format!("ask {a} echo ping"));
        // B handles the human's message first, alone: it is not asked, says nothing, and has
        // nothing left pending. Only A's reply can give it another turn.
        assert_eq!(h.host.agents().drive(&b).unwrap().consumed, 1);
        assert_eq!(h.transcript(&cv).len(), 1);

        // The controller runs; nothing ticks (no reaper): B's opportunity finds nothing to do,
        // A answers the human, and B must answer A because A's reply scheduled it.
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let started = Instant::now();
        runtime.spawn(h.host.agents().clone().run_workers());
        let answer = loop {
            let t = h.transcript(&cv);
            if let Some(m) = t
                .iter()
                .find(|m| matches!(&m.author, Author::Agent { agent_id, .. } if *agent_id == b))
            {
                break (t.clone(), m.clone());
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "B never answered A (only the tick would have woken it): {t:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = started.elapsed();
        let (t, from_b) = answer;
        let from_a = &t[1];
        assert!(matches!(&from_a.author, Author::Agent { agent_id, .. } if *agent_id == a));
        assert_eq!(from_a.body, "echo ping");
        assert_eq!(from_b.body, "echo: echo ping");
        assert_eq!(from_b.reply_to.as_deref(), Some(from_a.id.as_str()));
        // Well under the reaper's tick (a minute): two nano turns and their commits.
        assert!(took < Duration::from_secs(5), "B answered after {took:?}");
        eprintln!("agent-to-agent answer in {took:?}");
        runtime.shutdown_background();
    }
}

mod bounds {
    use super::*;

    #[test]
    fn checkpoint_loads_are_bounded_per_turn() {
        let h = host_with(CeilingCap::default());
        let (_, agent) = h.prober();
        let cv = h.conversation(&[&agent]);
        let at = format!("count load {MAX_LOADS_PER_TURN}");
        assert_eq!(h.ask(&agent, &cv, &at).unwrap(), "64 load calls, then: nothing");
        h.handled(&agent, &h.transcript(&cv)[0].id);
        let past = format!("count load {}", MAX_LOADS_PER_TURN + 1);
        assert_eq!(
            h.ask(&agent, &cv, &past).unwrap(),
            "64 load calls, then: checkpoint storage unavailable: more than 64 loads in one turn"
        );
    }

    #[test]
    fn consumes_are_bounded_per_turn() {
        let h = host_with(CeilingCap::default());
        let (_, agent) = h.prober();
        let cv = h.conversation(&[&agent]);
        // The first consume consumes the message; the others are no-ops, counted all the same.
        let at = format!("count consume {MAX_CONSUMES_PER_TURN}");
        assert_eq!(h.ask(&agent, &cv, &at).unwrap(), "256 consume calls, then: nothing");
        let past = format!("count consume {}", MAX_CONSUMES_PER_TURN + 1);
        assert_eq!(
            h.ask(&agent, &cv, &past).unwrap(),
            "256 consume calls, then: the conversation refused: more than 256 consumes in one turn"
        );
    }

    #[test]
    fn budget_calls_are_bounded_per_turn_and_a_call_past_the_bound_traps() {
        let h = host_with(CeilingCap::default());
        let (id, agent) = h.prober();
        let cv = h.conversation(&[&agent]);
        let at = format!("count budget {MAX_BUDGET_CALLS_PER_TURN}");
        assert_eq!(h.ask(&agent, &cv, &at).unwrap(), "256 budget calls, then: nothing");
        h.handled(&agent, &h.transcript(&cv)[0].id);
        // `budget` has no error to return: one call past the bound traps the turn, which ends
        // the sandbox and the transfer with the reason.
        let past = format!("count budget {}", MAX_BUDGET_CALLS_PER_TURN + 1);
        assert_eq!(h.ask(&agent, &cv, &past), None, "a trapped turn replies nothing");
        assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Terminated);
        let status = h.db().get_status(&id).unwrap();
        let ended = status
            .events
            .iter()
            .find(|e| e.kind == EventKind::Terminated)
            .expect("terminated");
        assert_eq!(
            ended.detail["reason"],
            "sandbox stopped: guest trapped: more than 256 metering.budget calls in one turn"
        );
    }
}

mod consumes {
    use super::*;

    #[test]
    fn a_turn_s_consumes_ride_in_its_end_and_its_own_reads_see_them() {
        let h = host_on_a_file();
        let (_, agent) = h.prober();
        let cv = h.conversation(&[&agent]);
        let first = h.post(&cv, "consume-then-read");
        let later = h.post(&cv, "later");
        let commits = || h.host.store().group().unwrap().stats().commits;
        let before = commits();
        let drive = h.host.agents().drive(&agent).unwrap();
        // The first turn answers `first` and leaves `later` queued: its end wakes the agent
        // again for it (it made progress), and the second turn answers it.
        assert_eq!(drive.consumed, 2, "{drive:?}");
        // Each turn: the claim with its fence, the reply with the consume the turn held, and
        // the end. No commit for the consume itself.
        assert_eq!(commits() - before, 6, "{drive:?}");
        let reply = h
            .transcript(&cv)
            .into_iter()
            .find(|m| m.reply_to.as_deref() == Some(&first));
        assert_eq!(reply.unwrap().body, "1 queued; consumed Some(true)");
        let carrier = h.host.agents().carrier(&agent).unwrap();
        let inbox = h
            .db()
            .read_inbox(&carrier.caller, &carrier.actor, 0, 10, false)
            .unwrap();
        let states: Vec<_> = inbox
            .iter()
            .map(|d| (d.message.id.clone(), d.consumed_at.is_some()))
            .collect();
        assert_eq!(states, [(first, true), (later.clone(), true)]);
        let echoed = h
            .transcript(&cv)
            .into_iter()
            .find(|m| m.reply_to.as_deref() == Some(&later));
        assert_eq!(
            echoed.unwrap().body,
            "echo: later",
            "answered by the leftover wake's turn"
        );
    }

    #[test]
    fn held_consumes_are_skipped_however_many_pages_they_fill() {
        let h = host_with(CeilingCap::default());
        let (_, agent) = h.prober();
        let cv = h.conversation(&[&agent]);
        // 230 queued: the first 200 the store returns are all held once the turn consumed
        // 225 of them, so the inbox reads on past a page with nothing to show.
        let first = h.post(&cv, "consume-all-but 5");
        for i in 1..230 {
            h.post(&cv, &format!("filler {i}"));
        }
        let drive = h.host.agents().drive(&agent).unwrap();
        assert_eq!(drive.consumed, 2, "the 5 left get a turn of their own: {drive:?}");
        let last = h
            .db()
            .read_transcript(&h.operator, &Acting::Human, &cv, 230, 10)
            .unwrap();
        let reply = last.into_iter().find(|m| m.reply_to.as_deref() == Some(&first));
        assert_eq!(reply.expect("the reply is message 231").body, "225 consumed, 5 queued");
        let carrier = h.host.agents().carrier(&agent).unwrap();
        let queued = h
            .db()
            .read_inbox(&carrier.caller, &carrier.actor, 0, 200, true)
            .unwrap();
        assert!(queued.is_empty(), "the 225 consumed with the reply, the 5 echoed after");
    }

    #[test]
    fn a_turn_stopped_by_a_ceiling_still_records_what_it_consumed() {
        let cap = CeilingCap {
            wall_clock_per_turn: Some(Duration::from_millis(500)),
            ..CeilingCap::default()
        };
        let h = host_with(cap);
        let (t, agent) = h.prober();
        let cv = h.conversation(&[&agent]);
        // Consumes its message, then calls consume until a ceiling stops the turn.
        let hammered = h.post(&cv, "hammer consume");
        let left = h.post(&cv, "left alone");
        let drive = h.host.agents().drive(&agent).unwrap();
        assert_eq!(drive.unknown, 1, "the turn was stopped: {drive:?}");
        let status = h.db().transfer(&t).unwrap().status;
        assert_eq!(
            status,
            TransferStatus::Terminated,
            "a stopped sandbox ends its transfer"
        );
        // Its endpoint is detached now, so the states are read from the table.
        let state = |m: &str| -> String {
            h.db()
                .connection()
                .query_row("SELECT state FROM deliveries WHERE message_id = ?1", [m], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(state(&hammered), "consumed", "recorded before the transfer ended");
        assert_eq!(state(&left), "queued");
    }

    #[test]
    fn a_consume_of_a_message_not_delivered_to_the_agent_is_refused_at_once() {
        let h = host_with(CeilingCap::default());
        let ((_, a), (_, b)) = (h.prober(), h.prober());
        let (cv_a, cv_b) = (h.conversation(&[&a]), h.conversation(&[&b]));
        let b_s = h.post(&cv_b, "noop");
        let answer = h.ask(&a, &cv_a, &format!("consume-id {b_s}")).unwrap();
        assert!(answer.starts_with("refused: "), "{answer}");
        // Nothing was held for A's turn's end, and B's delivery is untouched.
        let carrier = h.host.agents().carrier(&b).unwrap();
        let inbox = h.db().read_inbox(&carrier.caller, &carrier.actor, 0, 10, true).unwrap();
        assert_eq!(inbox.len(), 1, "B's message is still queued for B");
    }
}

mod spin {
    use super::*;

    #[test]
    fn a_call_free_loop_stopped_by_the_wall_clock_is_charged_the_fuel_it_burnt() {
        // Large: 30 CPU-s of fuel per turn, so a one-second wall clock stops the loop first.
        let cap = CeilingCap {
            wall_clock_per_turn: Some(Duration::from_secs(1)),
            ..CeilingCap::default()
        };
        let h = host_with(cap);
        let (id, report) = h.activated("loop-forever", Tier::Large);
        assert_eq!(report.outcome, RunOutcome::CeilingExceeded(Ceiling::WallClock));
        // A second of spinning burns hundreds of millions of fuel on any machine; what the
        // meter cannot see of it is at most one flush interval.
        assert!(
            report.fuel_consumed >= 5 * FUEL_FLUSH_INTERVAL,
            "the loop burnt only {} fuel by the meter",
            report.fuel_consumed
        );
        let limits = Tier::Large.limits();
        assert!(report.fuel_consumed <= limits.fuel_per_turn);
        let compute = limits.compute_cost_micro_usd(report.fuel_consumed);
        let spent = h.db().budget(&id).unwrap().unwrap().spent_micro_usd;
        assert_eq!(report.compute_micro_usd, compute, "the fuel burnt is what was charged");
        assert_eq!(spent, compute, "and what the budget shows spent");
        eprintln!(
            "a 1 s wall-clock spin: {} fuel, {compute} micro-USD",
            report.fuel_consumed
        );
    }
}

/// A host of a shared database whose lease went stale (it could not renew in time) runs no
/// turn and drops its carriers — another host may claim its agents any moment — and, once it
/// renews (nobody claimed it) or joins again (somebody did), binds what it still carries at the
/// next generation.
mod stale_lease {
    use super::*;

    #[test]
    fn a_stale_lease_stops_turns_and_a_renewal_binds_the_agents_again() {
        let h = host_with(CeilingCap::default());
        let agents = h.host.agents();
        agents.join(Duration::from_secs(1), None, true, "interrupted").unwrap();
        assert!(agents.lease_fresh());
        let (_, agent) = h.prober();
        let before = agents.carrier(&agent).unwrap().actor.generation;
        let cv = h.conversation(&[&agent]);
        h.post(&cv, "hello");
        std::thread::sleep(Duration::from_millis(850));
        assert!(!agents.lease_fresh());
        let drive = agents.drive(&agent).unwrap();
        assert_eq!(drive.consumed, 0, "no turn starts on a stale lease: {drive:?}");
        assert!(agents.carrier(&agent).is_none(), "its carrier is dropped");
        assert!(h.transcript(&cv).len() == 1, "nothing answered");

        agents.keep_lease();
        assert!(agents.lease_fresh());
        let after = agents.carrier(&agent).expect("bound again").actor.generation;
        assert!(after > before, "generation {before} → {after}");
        let drive = agents.drive(&agent).unwrap();
        assert_eq!(drive.consumed, 1, "{drive:?}");
        assert_eq!(h.transcript(&cv).len(), 2, "answered once");
    }

    #[test]
    fn a_turn_running_when_the_lease_stops_being_fresh_is_cut_off_then_and_its_transfer_kept() {
        let h = host_with(CeilingCap::default());
        let agents = h.host.agents().clone();
        // Fresh for 80 % of 2 s.
        agents.join(Duration::from_secs(2), None, true, "interrupted").unwrap();
        // Small: a 15 s wall clock, which the 10 s sleep stays within.
        let (t, report) = h.activated("turn-prober", Tier::Small);
        let agent = report.transfer.agent_id.unwrap();
        let cv = h.conversation(&[&agent]);
        h.post(&cv, "reply-then-sleep 10000");
        let started = Instant::now();
        let id = agent.clone();
        let turn = std::thread::spawn(move || agents.drive(&id).unwrap());
        let drive = turn.join().unwrap();
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "the 10 s turn is cut off when the lease stops being fresh (1.6 s), not at its end: {took:?}"
        );
        assert_eq!(
            (drive.consumed, drive.unknown),
            (0, 0),
            "nothing is concluded here: {drive:?}"
        );
        let agents = h.host.agents();
        assert!(agents.carrier(&agent).is_none(), "its carrier is dropped");
        assert!(!h.host.sandboxes().is_live(&t), "its sandbox is dropped");
        assert_eq!(
            h.db().transfer(&t).unwrap().status,
            TransferStatus::Active,
            "a lease that lapsed is not the agent's failure"
        );
        // What the guest did before the cut stays: its reply.
        assert_eq!(h.transcript(&cv).len(), 2);

        agents.keep_lease();
        assert!(agents.lease_fresh());
        assert!(
            agents.carrier(&agent).is_some(),
            "bound again once the lease is renewed"
        );
    }
}

mod parking {
    use ahp_host::carrier::{Carriers, Residency};
    use ahp_host::sandbox::Parking;

    use super::*;

    /// A host that parks after `idle_after` and keeps at most `max_live` sandboxes.
    fn parking_host(idle_after: Option<Duration>, max_live: usize) -> Host {
        let parking = Parking { idle_after, max_live };
        host_configured(|b| b.parking(parking), Some(1))
    }

    /// Where `agent`'s sandbox is, as `list_agent_identities` and the console see it.
    fn residency(h: &Host, agent: &str) -> Option<Residency> {
        let listing = h.db().list_agent_listings(&h.operator, None, 100).unwrap();
        let l = listing.iter().find(|l| l.agent.id == agent).unwrap();
        let endpoint = l.current_endpoint.as_ref().unwrap();
        let agents = h.host.agents();
        assert!(agents.holds(endpoint), "a parked agent stays ready");
        agents.residency(endpoint)
    }

    #[test]
    fn an_idle_agent_is_parked_and_its_next_turn_runs_in_a_fresh_sandbox() {
        let idle = Duration::from_secs(60);
        let h = parking_host(Some(idle), usize::MAX);
        let (transfer, agent) = h.prober();
        let cv = h.conversation(&[&agent]);
        assert_eq!(h.ask(&agent, &cv, "echo one").unwrap(), "echo: echo one");
        let sandboxes = h.host.sandboxes();
        assert_eq!(residency(&h, &agent), Some(Residency::Live));
        // Not idle long enough: kept.
        assert!(sandboxes.park_idle(Instant::now()).is_empty());
        assert!(sandboxes.is_live(&transfer));
        // Idle past the setting: parked, and still ready.
        assert_eq!(
            sandboxes.park_idle(Instant::now() + idle),
            std::slice::from_ref(&transfer)
        );
        assert!(!sandboxes.is_live(&transfer));
        assert_eq!(sandboxes.live_count(), 0);
        assert_eq!(sandboxes.parks(), 1);
        assert_eq!(residency(&h, &agent), Some(Residency::Parked));
        // Nothing of it is held in memory: its carrier is its rows.
        let agents = h.host.agents();
        assert!(agents.carrier(&agent).is_none());
        assert_eq!(agents.carrier_count(), 0);
        // Nor renewing, sweeping or scheduling it needs anything held: its lease renews in
        // bulk, the sweep keeps it, and a wake nobody scheduled is found from its rows.
        assert!(agents.sweep().unwrap().is_empty());
        drop(agents.drain_queue());
        agents.schedule_all();
        assert!(agents.drain_queue().is_empty(), "no wake yet");
        // The next message — committed where nobody scheduled it — is found by the tick from
        // its rows, and answered from a fresh sandbox (a turn, no resume), charged.
        let spent = h.db().budget(&transfer).unwrap().unwrap().spent_micro_usd;
        let question = h.post(&cv, "echo two");
        agents.schedule_all();
        assert_eq!(agents.drain_queue(), std::slice::from_ref(&agent));
        assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
        assert!(
            h.transcript(&cv)
                .iter()
                .any(|m| m.reply_to.as_deref() == Some(question.as_str()) && m.body == "echo: echo two")
        );
        assert_eq!(residency(&h, &agent), Some(Residency::Live));
        assert!(agents.carrier(&agent).is_some(), "held again while live");
        assert!(
            h.db().budget(&transfer).unwrap().unwrap().spent_micro_usd > spent,
            "the turn is charged"
        );
        assert_eq!(h.db().transfer(&transfer).unwrap().status, TransferStatus::Active);
    }

    #[test]
    fn beyond_the_live_cap_the_least_recently_used_agent_is_parked() {
        let h = parking_host(None, 2);
        let agents: Vec<(String, String)> = (0..3).map(|_| h.prober()).collect();
        // Each activation set up a sandbox; the third made room by parking the first.
        let sandboxes = h.host.sandboxes();
        assert_eq!(sandboxes.live_count(), 2);
        assert!(!sandboxes.is_live(&agents[0].0));
        assert_eq!(sandboxes.parks(), 1);
        let cvs: Vec<String> = agents.iter().map(|(_, a)| h.conversation(&[a])).collect();
        for round in 0..2 {
            for (i, ((transfer, agent), cv)) in agents.iter().zip(&cvs).enumerate() {
                let body = format!("echo {round}-{i}");
                assert_eq!(h.ask(agent, cv, &body).unwrap(), format!("echo: {body}"));
                assert!(sandboxes.is_live(transfer), "the agent that just answered is live");
                assert!(sandboxes.live_count() <= 2, "never more than the cap");
                assert!(
                    h.host.agents().carrier_count() <= 2,
                    "no carrier held for a parked agent"
                );
                assert!(h.host.agents().carrier(agent).is_some());
            }
        }
        // Every answer after the activations needed room: round robin over three agents with
        // room for two parks one agent per turn.
        assert_eq!(sandboxes.parks(), 7);
        for (transfer, _) in &agents {
            assert_eq!(h.db().transfer(transfer).unwrap().status, TransferStatus::Active);
        }
    }

    #[test]
    fn a_resume_only_sandbox_is_never_parked() {
        // Idle past the setting, and in the way of the only slot.
        let h = parking_host(Some(Duration::from_secs(1)), 1);
        let (transfer, report) = h.activated("legacy-agent", Tier::Nano);
        assert_eq!(report.outcome, RunOutcome::Returned);
        let sandboxes = h.host.sandboxes();
        assert!(sandboxes.is_live(&transfer));
        assert!(
            sandboxes
                .park_idle(Instant::now() + Duration::from_secs(3600))
                .is_empty()
        );
        assert!(sandboxes.make_room("tr_other").is_empty());
        assert!(sandboxes.is_live(&transfer), "dropping it would end its agent");
    }
}

/// A move towards a host that dies before the hand-over (`kill -9` after `ahp agent move`): the
/// agent is never handed to a host that will not bind it, and goes on answering from the host
/// that carries it. Host B is a second connection to the same database file that joins and
/// never renews.
mod moves {
    use super::*;
    use ahp_host::store::hosts::MIN_HOST_LEASE;

    /// Host B on `h`'s database, joined with the shortest lease, which it never renews.
    fn short_lived_peer(h: &Host) -> Store {
        let mut b = Store::open(h._dir.path().join("ahp.db"))
            .unwrap()
            .with_host_id("host-b")
            .unwrap();
        b.join_host(MIN_HOST_LEASE, None).unwrap();
        b
    }

    /// Host A carrying a turn-prober and a conversation with it, with a move of it asked
    /// towards B, then B dead (its lease lapsed).
    fn moving_towards_a_dead_host() -> (Host, String, String, String) {
        let h = host_on_a_file();
        h.host
            .agents()
            .join(Duration::from_secs(5), None, true, "interrupted")
            .unwrap();
        let (t, agent) = h.prober();
        let cv = h.conversation(&[&agent]);
        let _b = short_lived_peer(&h);
        h.db().request_agent_move(&agent, "host-b").unwrap();
        std::thread::sleep(MIN_HOST_LEASE + Duration::from_millis(100));
        (h, t, agent, cv)
    }

    /// Whether this host (`local`) carries `transfer`, as its row says.
    fn carried_here(h: &Host, transfer: &str) -> bool {
        h.db()
            .carried_transfers(None, 10)
            .unwrap()
            .contains(&transfer.to_owned())
    }

    #[test]
    fn a_host_claimed_before_the_hand_over_never_receives_the_agent() {
        let (h, t, agent, cv) = moving_towards_a_dead_host();
        let agents = h.host.agents();
        let claims = agents.claim_lapsed();
        assert_eq!(claims.iter().map(|c| c.host.as_str()).collect::<Vec<_>>(), ["host-b"]);
        assert_eq!(h.db().agent_move(&t).unwrap(), None, "the claim dropped the move");
        // The worker's next opportunity would hand it over: there is nothing to hand over.
        agents.hand_over_moves();
        agents.drive(&agent).unwrap();
        h.post(&cv, "still there?");
        let drive = agents.drive(&agent).unwrap();
        assert_eq!(drive.consumed, 1, "{drive:?}");
        assert_eq!(h.transcript(&cv).len(), 2, "answered");
        assert!(carried_here(&h, &t));
    }

    #[test]
    fn a_hand_over_towards_a_lapsed_host_is_refused_and_the_agent_answers_here() {
        let (h, t, agent, cv) = moving_towards_a_dead_host();
        let agents = h.host.agents();
        // B lapsed but nobody claimed it yet: the hand-over is refused and the move dropped.
        agents.hand_over_moves();
        h.post(&cv, "still there?");
        agents.drive(&agent).unwrap();
        agents.drive(&agent).unwrap();
        assert_eq!(h.db().agent_move(&t).unwrap(), None, "the refusal dropped the move");
        assert!(carried_here(&h, &t));
        assert_eq!(h.transcript(&cv).len(), 2, "answered");
        assert!(agents.carrier(&agent).is_some(), "still carried here");
    }
}

mod lost_agent {
    use super::*;

    /// The `search_api` spend the prober's `report` calls recorded for `transfer`.
    fn reports(h: &Host, transfer: &str) -> usize {
        h.db()
            .get_status(transfer)
            .unwrap()
            .events
            .iter()
            .filter(|e| e.kind == EventKind::UsageReported && e.detail["kind"] == "search_api")
            .count()
    }

    #[test]
    fn a_turn_whose_spend_is_refused_because_another_host_carries_the_agent_is_cancelled() {
        let h = host_on_a_file();
        // Small: its fuel and wall clock outlast the reports by far.
        let (transfer, report) = h.activated("turn-prober", Tier::Small);
        let agent = report.transfer.agent_id.unwrap();
        let cv = h.conversation(&[&agent]);
        h.post(&cv, "hammer report");
        let agents = h.host.agents().clone();
        let id = agent.clone();
        let turn = std::thread::spawn(move || agents.drive(&id).unwrap());
        let deadline = Instant::now() + Duration::from_secs(10);
        while reports(&h, &transfer) == 0 {
            assert!(Instant::now() < deadline, "the prober never reported");
            std::thread::sleep(Duration::from_millis(2));
        }
        // Another host carries the agent now, as a takeover records it.
        rusqlite::Connection::open(h._dir.path().join("ahp.db"))
            .unwrap()
            .execute("UPDATE transfers SET host_id = 'host-b' WHERE id = ?1", [&transfer])
            .unwrap();
        let recorded = reports(&h, &transfer);
        let drive = turn.join().unwrap();
        assert_eq!(
            (drive.consumed, drive.unknown),
            (0, 0),
            "nothing concluded here: {drive:?}"
        );
        assert_eq!(
            reports(&h, &transfer),
            recorded,
            "spend recorded after the agent was lost"
        );
        assert!(h.host.agents().carrier(&agent).is_none(), "its carrier is dropped");
        assert_eq!(
            h.db().transfer(&transfer).unwrap().status,
            TransferStatus::Active,
            "losing the agent is not the agent's failure"
        );
    }
}

mod aliasing {
    use super::*;
    use ahp_host::sandbox::host_resources;

    /// The string the review measured with: half a nano guest's memory.
    const STRING_BYTES: usize = 16 * 1024 * 1024;

    /// Every import whose arguments hold lists (`interfaces::bounded`), with the error it
    /// refuses aliased copies of the string with (the guest's `Debug` of it), and the copies
    /// tried: the review's 7 and 64. `fields.append` takes one name and one value.
    const LIST_CALLS: [(&str, &str, &[usize]); 8] = [
        ("register-wait", "Invalid", &[7, 64]),
        ("create-goal", "Invalid", &[7, 64]),
        ("checkpoint-goal", "Invalid", &[7, 64]),
        ("estimate", "TooLarge", &[7, 64]),
        ("complete", "TooLarge", &[7, 64]),
        ("fields.from-list", "HeaderError::Forbidden", &[7, 64]),
        ("fields.set", "HeaderError::Forbidden", &[7, 64]),
        ("fields.append", "HeaderError::Forbidden", &[1]),
    ];

    /// Slack over the documented bound for the rest of the process during the turns (audit
    /// rows, the transcript, allocator fragmentation), as `sandbox::hoarding`'s hoarder allows.
    const PROCESS_SLACK_BYTES: u64 = 8 * 1024 * 1024;

    /// An aliasing-caller agent on `nano`, carried by `h`, alone in a conversation.
    fn caller(h: &Host) -> (String, String, String) {
        let (transfer, report) = h.activated("aliasing-caller", Tier::Nano);
        assert_eq!(report.outcome, RunOutcome::Returned);
        let agent = report.transfer.agent_id.expect("bound at activation");
        let cv = h.conversation(&[&agent]);
        (transfer, agent, cv)
    }

    /// Run alone in a child process (see the test below) so no other test's memory counts.
    #[test]
    #[ignore = "run by every_list_call_refuses_aliased_copies_within_the_host_bound in its own process"]
    fn aliasing_rss_probe() {
        let h = host_with(CeilingCap::default());
        let (transfer, agent, cv) = caller(&h);
        assert_eq!(h.ask(&agent, &cv, "warm up").as_deref(), Some("echo: warm up"));
        let before = rss::reset_peak();
        for (call, error, copies) in LIST_CALLS {
            for n in copies {
                let reply = h.ask(&agent, &cv, &format!("alias {call} {n} {STRING_BYTES}"));
                let want = format!("{call} x{n}: refused {error}");
                assert!(
                    reply.as_deref().is_some_and(|r| r.starts_with(&want)),
                    "{want}…, got {reply:?}; the transfer's last events: {:?}",
                    h.db()
                        .get_status(&transfer)
                        .unwrap()
                        .events
                        .iter()
                        .rev()
                        .take(3)
                        .collect::<Vec<_>>()
                );
            }
        }
        let peak = rss::peak();
        // The agent goes on: it answers its next message.
        assert_eq!(h.ask(&agent, &cv, "still here").as_deref(), Some("echo: still here"));
        println!("rss_growth_bytes={}", peak.saturating_sub(before));
    }

    #[test]
    fn every_list_call_refuses_aliased_copies_within_the_host_bound() {
        let stdout = rss::run_probe("turns::aliasing::aliasing_rss_probe");
        let growth = rss::probe_value(&stdout, "rss_growth_bytes=");
        // The guest's own linear memory (the string lives there) and what it can make the host
        // hold. Copied before weighing, 7 copies alone were 112 MiB.
        let nano = Tier::Nano.limits();
        let bound = nano.memory_bytes + host_resources::host_bytes_bound(nano) + PROCESS_SLACK_BYTES;
        assert!(growth <= bound, "peak RSS grew {growth} bytes; the bound is {bound}");
        eprintln!(
            "peak RSS growth over {} aliased calls of a 16 MiB string: {} KiB (bound {} KiB)",
            LIST_CALLS.iter().map(|(_, _, c)| c.len()).sum::<usize>(),
            growth / 1024,
            bound / 1024
        );
    }

    #[test]
    fn a_call_of_fixed_arity_copies_up_to_the_budget_and_one_byte_past_it_is_a_breach() {
        let h = host_with(CeilingCap::default());
        let nano = Tier::Nano.limits();
        let budget = host_resources::hostcall_copy_bytes(nano);
        // `create-task`'s four strings, each a quarter of the budget: copied, then refused.
        let (transfer, agent, cv) = caller(&h);
        let at = budget / 4;
        let reply = h.ask(&agent, &cv, &format!("alias create-task 4 {at}"));
        assert!(
            reply
                .as_deref()
                .is_some_and(|r| r.starts_with("create-task x4: refused Invalid")),
            "{reply:?}"
        );
        // One byte more each: wasmtime's copy budget stops the call before the host runs it.
        let question = h.post(&cv, &format!("alias create-task 4 {}", at + 1));
        h.host.agents().drive(&agent).unwrap();
        assert!(
            h.transcript(&cv)
                .iter()
                .all(|m| m.reply_to.as_deref() != Some(&question)),
            "a call past the copy budget ran"
        );
        assert_eq!(h.db().transfer(&transfer).unwrap().status, TransferStatus::Terminated);
        let events = h.db().get_status(&transfer).unwrap().events;
        let breach = events
            .iter()
            .find(|e| e.kind == EventKind::CeilingExceeded)
            .expect("a ceiling_exceeded event");
        assert_eq!(breach.detail["ceiling"], "host_resources", "{:?}", breach.detail);
    }
}
