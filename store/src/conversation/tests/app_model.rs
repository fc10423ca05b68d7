//! A model-based property test of the MCP App pull carrier: random interleavings of posts,
//! Views loading (in one of two windows, or none), bind, acquire, prepare, finish, the turn's
//! consume, unbind, host restarts, clock moves past the lease and the expired-endpoint
//! replacement — each View keeping only what a real one keeps (its last claim, its last sent
//! attempt).
//!
//! After every step: no wake crossed the fence twice; no attempt was prepared twice (a View
//! sends one `ui/message` per successful prepare, so at most one per attempt); the delegation
//! invariants hold. At the end, a View on a fresh endpoint drains every pending wake: none is
//! lost, and every wake past the fence is consumed or settled `delivery_unknown`.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

const WINDOWS: [Option<&str>; 3] = [Some("window-a"), Some("window-b"), None];

#[derive(Debug, Clone)]
enum Op {
    Post,
    Load(usize),
    Bind(usize),
    Acquire(usize),
    Prepare(usize),
    Finish(usize, bool),
    Consume,
    Unbind(usize),
    Restart,
    Advance(u64),
    Replace(usize),
    /// What a View does on a heartbeat: acquire, prepare what it claimed and — for 0 and 1 —
    /// finish as accepted or unknown (2: no answer yet).
    Cycle(usize, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let v = 0usize..4;
    prop_oneof![
        4 => Just(Op::Post),
        1 => (0usize..WINDOWS.len()).prop_map(Op::Load),
        2 => v.clone().prop_map(Op::Bind),
        3 => v.clone().prop_map(Op::Acquire),
        3 => v.clone().prop_map(Op::Prepare),
        2 => (v.clone(), any::<bool>()).prop_map(|(i, ok)| Op::Finish(i, ok)),
        2 => Just(Op::Consume),
        1 => v.clone().prop_map(Op::Unbind),
        1 => Just(Op::Restart),
        2 => (0u64..120).prop_map(Op::Advance),
        1 => Just(Op::Advance(600)),
        1 => v.clone().prop_map(Op::Replace),
        6 => (v, 0u8..3).prop_map(|(i, k)| Op::Cycle(i, k)),
    ]
}

/// A View as the App keeps it: its fence and window, its last claim and its last sent attempt.
#[derive(Debug)]
struct View {
    fence: String,
    window: Option<&'static str>,
    claimed: Option<String>,
    sent: Option<String>,
}

impl View {
    fn as_app(&self) -> AppView<'_> {
        AppView {
            binding: &self.fence,
            window: self.window,
        }
    }
}

struct Run {
    w: World,
    alice: Caller,
    cv: Conversation,
    actor: AgentActor,
    views: Vec<View>,
    /// Tickets the host's turn may consume: (wake, token).
    tickets: Vec<(String, String)>,
    /// Attempts a prepare succeeded for: each got its one `ui/message`.
    sent: HashSet<String>,
}

/// Refusals are the carrier's ordinary answers; a corrupt row or a database failure is a bug.
fn tolerated<T>(r: Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e @ (Error::CorruptRow { .. } | Error::Database(_))) => panic!("{e}"),
        Err(_) => None,
    }
}

impl Run {
    fn new() -> Self {
        let mut w = world();
        let alice = w.alice.clone();
        let a = w.agent(&alice);
        let k = w.key();
        let ep = w.store.attach_endpoint(&alice, &a.id, LEASE, &k).unwrap().value;
        let cv = w.conversation(&alice, &[&a]);
        let mut run = Run {
            w,
            alice,
            cv,
            actor: AgentActor::of(&ep),
            views: Vec::new(),
            tickets: Vec::new(),
            sent: HashSet::new(),
        };
        run.load(0);
        let v = run.views[0].as_app();
        run.w.store.bind_app_view(&run.alice, &run.actor, &v).unwrap();
        run
    }

    fn load(&mut self, window: usize) {
        let n = self.views.len();
        self.views.push(View {
            fence: format!("{APP_BINDING_PREFIX}{n:032x}"),
            window: WINDOWS[window],
            claimed: None,
            sent: None,
        });
    }

    fn view(&self, i: usize) -> usize {
        i % self.views.len()
    }

    fn prepare(&mut self, i: usize, attempt: &str) {
        let v = &self.views[i];
        if let Some(t) = tolerated(
            self.w
                .store
                .prepare_app_dispatch(&self.alice, &self.actor, &v.as_app(), attempt),
        ) {
            assert!(
                self.sent.insert(t.attempt.id.clone()),
                "attempt {} prepared twice: a second ui/message",
                t.attempt.id
            );
            self.tickets.push((t.wake.id.clone(), t.consume_token.clone()));
            self.views[i].sent = Some(t.attempt.id);
        }
        self.views[i].claimed = None;
    }

    fn step(&mut self, op: &Op) {
        let (alice, actor) = (self.alice.clone(), self.actor.clone());
        match *op {
            Op::Post => {
                let p = self.w.new_post(&self.cv, Acting::Human, "m");
                tolerated(self.w.store.post_message(&alice, &p));
            }
            Op::Load(window) => self.load(window),
            Op::Bind(i) => {
                let i = self.view(i);
                tolerated(self.w.store.bind_app_view(&alice, &actor, &self.views[i].as_app()));
            }
            Op::Acquire(i) => {
                let i = self.view(i);
                let got = tolerated(
                    self.w
                        .store
                        .acquire_app_wake(&alice, &actor, &self.views[i].as_app(), CLAIM),
                );
                match got {
                    Some(AppAcquire::Claimed { claim }) => self.views[i].claimed = Some(claim.attempt.id),
                    // What the App does with its open attempt: prepare a claim it holds;
                    // finish as unknown one past the fence it has no answer for.
                    Some(AppAcquire::Open { attempt }) => match attempt.state {
                        AttemptState::Claimed => self.views[i].claimed = Some(attempt.id),
                        AttemptState::Dispatched if self.views[i].sent.as_deref() != Some(&attempt.id) => {
                            let v = self.views[i].as_app();
                            tolerated(self.w.store.finish_app_dispatch(
                                &alice,
                                &actor,
                                &v,
                                &attempt.id,
                                DispatchOutcome::Unknown,
                            ));
                        }
                        _ => {}
                    },
                    _ => {}
                }
            }
            Op::Prepare(i) => {
                let i = self.view(i);
                if let Some(attempt) = self.views[i].claimed.clone() {
                    self.prepare(i, &attempt);
                }
            }
            Op::Finish(i, accepted) => {
                let i = self.view(i);
                if let Some(attempt) = self.views[i].sent.take() {
                    let outcome = if accepted {
                        DispatchOutcome::Accepted
                    } else {
                        DispatchOutcome::Unknown
                    };
                    let v = self.views[i].as_app();
                    tolerated(self.w.store.finish_app_dispatch(&alice, &actor, &v, &attempt, outcome));
                }
            }
            Op::Consume => {
                if let Some((wake, token)) = self.tickets.pop() {
                    tolerated(self.w.store.consume_wake(&alice, &actor, &wake, &token));
                }
            }
            Op::Unbind(i) => {
                let i = self.view(i);
                tolerated(self.w.store.unbind_app_view(&alice, &actor, &self.views[i].as_app()));
            }
            Op::Restart => {
                self.w.store.reconcile_takeover().unwrap();
            }
            Op::Advance(secs) => self.w.clock.advance(Duration::from_secs(secs)),
            Op::Cycle(i, finish) => {
                // The App binds (or renews) first; an expired endpoint it asks to replace.
                let i = self.view(i);
                let v = self.views[i].as_app();
                let bound = self.w.store.bind_app_view(&alice, &actor, &v);
                if matches!(bound, Err(Error::EndpointExpired { .. })) {
                    self.step(&Op::Replace(i));
                    self.step(&Op::Bind(i));
                } else {
                    tolerated(bound);
                }
                self.step(&Op::Acquire(i));
                self.step(&Op::Prepare(i));
                if finish < 2 {
                    self.step(&Op::Finish(i, finish == 0));
                }
            }
            Op::Replace(i) => {
                let i = self.view(i);
                let v = self.views[i].as_app();
                let r = self.w.store.replace_expired_app_endpoint(
                    &alice,
                    &actor.agent,
                    &actor.endpoint,
                    actor.generation,
                    &v,
                );
                if let Some(EndpointRecovery::Replaced { successor, .. }) = tolerated(r) {
                    self.actor = AgentActor::of(&successor);
                }
            }
        }
    }

    fn check(&mut self) {
        let twice = self.w.count(
            "SELECT count(*) FROM (SELECT wake_id FROM wake_attempts WHERE consume_token_hash IS NOT NULL
                                   GROUP BY wake_id HAVING count(*) > 1) AS x",
        );
        assert_eq!(twice, 0, "a wake crossed the dispatch fence twice");
        let v = self.w.violations();
        assert!(v.is_empty(), "{v:?}");
    }

    /// A fresh endpoint and View drain every pending wake: none is lost.
    fn drain(&mut self) {
        let alice = self.alice.clone();
        let k = self.w.key();
        let ep = self
            .w
            .store
            .attach_endpoint(&alice, &self.actor.agent, LEASE, &k)
            .unwrap()
            .value;
        self.actor = AgentActor::of(&ep);
        self.load(2);
        let i = self.views.len() - 1;
        let v = self.views[i].as_app();
        let (binding, window) = (v.binding.to_owned(), v.window);
        let v = AppView {
            binding: &binding,
            window,
        };
        self.w.store.bind_app_view(&alice, &self.actor, &v).unwrap();
        for _ in 0..4 {
            match self.w.store.acquire_app_wake(&alice, &self.actor, &v, CLAIM).unwrap() {
                AppAcquire::Claimed { claim } => {
                    let t = self
                        .w
                        .store
                        .prepare_app_dispatch(&alice, &self.actor, &v, &claim.attempt.id)
                        .unwrap();
                    assert!(self.sent.insert(t.attempt.id.clone()));
                    self.w
                        .store
                        .finish_app_dispatch(&alice, &self.actor, &v, &t.attempt.id, DispatchOutcome::Accepted)
                        .unwrap();
                    self.w
                        .store
                        .consume_wake(&alice, &self.actor, &t.wake.id, &t.consume_token)
                        .unwrap();
                }
                AppAcquire::Idle => break,
                AppAcquire::Open { attempt } => panic!("a fresh View found an open attempt {attempt:?}"),
            }
        }
        assert_eq!(
            self.w
                .count("SELECT count(*) FROM wakes WHERE state IN ('pending', 'claimed')"),
            0,
            "a wake was lost"
        );
        assert_eq!(
            self.w.count(
                "SELECT count(*) FROM wakes w WHERE w.state = 'dispatched' AND NOT EXISTS
                   (SELECT 1 FROM wake_attempts a WHERE a.wake_id = w.id AND a.state = 'delivery_unknown')"
            ),
            0,
            "a wake past the fence is neither consumed nor settled"
        );
        self.check();
    }
}

proptest! {
    // Each case is a database of its own: fewer on PostgreSQL, where one costs more.
    #![proptest_config(ProptestConfig {
        cases: if crate::testing::on_postgres() { 16 } else { 64 },
        ..ProptestConfig::default()
    })]

    #[test]
    fn app_carrier_interleavings_send_at_most_once_and_lose_no_wake(ops in prop::collection::vec(op(), 1..60)) {
        let mut run = Run::new();
        for op in &ops {
            run.step(op);
            run.check();
        }
        run.drain();
    }
}
