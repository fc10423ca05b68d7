//! A model-based property test: random interleavings of posts, inbox reads, delivery consumes,
//! claims, dispatches, finishes, wake consumes, detaches, attaches, takeover reconciliations
//! and clock moves, checked after every step against an in-memory model.
//!
//! Invariants: seqs are exactly `1..=n`; every agent's deliveries are exactly the model's (none
//! lost, none duplicated, states agree); at most one open wake per agent, whose count and state
//! agree with the model; every delivery is counted in exactly one wake; fenced attempts are never
//! claimed again and their states agree with the model.

use proptest::prelude::*;

use super::*;

const AGENTS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    Post(Option<usize>),
    ReadInbox(usize),
    ConsumeDelivery(usize, usize),
    Claim(usize),
    Dispatch(usize),
    Finish(usize, bool),
    ConsumeWake(usize, usize),
    Detach(usize),
    Attach(usize),
    Reconcile,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let agent = 0..AGENTS;
    prop_oneof![
        4 => prop::option::of(agent.clone()).prop_map(Op::Post),
        1 => agent.clone().prop_map(Op::ReadInbox),
        2 => (agent.clone(), any::<usize>()).prop_map(|(a, k)| Op::ConsumeDelivery(a, k)),
        3 => agent.clone().prop_map(Op::Claim),
        3 => agent.clone().prop_map(Op::Dispatch),
        2 => (agent.clone(), any::<bool>()).prop_map(|(a, ok)| Op::Finish(a, ok)),
        2 => (agent.clone(), any::<usize>()).prop_map(|(a, k)| Op::ConsumeWake(a, k)),
        1 => agent.clone().prop_map(Op::Detach),
        2 => agent.prop_map(Op::Attach),
        1 => Just(Op::Reconcile),
        1 => (0u64..40).prop_map(Op::Advance),
    ]
}

#[derive(Debug, Clone)]
struct Claim {
    attempt: String,
    expires: Timestamp,
}

#[derive(Debug, Clone)]
struct OpenWake {
    id: Option<String>,
    count: u64,
    claim: Option<Claim>,
}

#[derive(Debug, Clone)]
struct Fenced {
    wake: String,
    attempt: String,
    endpoint: String,
    token: String,
    state: AttemptState,
}

#[derive(Debug, Default)]
struct AgentModel {
    actor: Option<AgentActor>,
    deliveries: Vec<(String, bool)>,
    open: Option<OpenWake>,
    fenced: Vec<Fenced>,
}

impl AgentModel {
    /// What retiring the current endpoint does: pre-fence claims released, dispatches (and
    /// accepted attempts never consumed) unknown.
    fn retire_endpoint(&mut self) {
        if let Some(actor) = self.actor.take() {
            self.reconcile_endpoint(&actor.endpoint);
        }
    }

    fn reconcile_endpoint(&mut self, endpoint: &str) {
        if let Some(o) = &mut self.open {
            o.claim = None;
        }
        for f in &mut self.fenced {
            if f.endpoint == endpoint && matches!(f.state, AttemptState::Dispatched | AttemptState::Accepted) {
                f.state = AttemptState::DeliveryUnknown;
            }
        }
    }
}

struct Harness {
    w: World,
    alice: Caller,
    agents: Vec<Agent>,
    cv: Conversation,
    model: Vec<AgentModel>,
    seq: u64,
}

impl Harness {
    fn new() -> Self {
        let mut w = world();
        let alice = w.alice.clone();
        let agents: Vec<Agent> = (0..AGENTS).map(|_| w.agent(&alice)).collect();
        let refs: Vec<&Agent> = agents.iter().collect();
        let cv = w.conversation(&alice, &refs);
        Self {
            w,
            alice,
            agents,
            cv,
            model: (0..AGENTS).map(|_| AgentModel::default()).collect(),
            seq: 0,
        }
    }

    fn apply(&mut self, op: &Op) {
        let alice = self.alice.clone();
        let now = self.w.store.now();
        match *op {
            Op::Post(author) => {
                let acting = match author.and_then(|a| self.model[a].actor.clone().map(|act| (a, act))) {
                    Some((_, act)) => Acting::Agent(act),
                    None => Acting::Human,
                };
                let author = match &acting {
                    Acting::Agent(_) => author,
                    Acting::Human => None,
                };
                let m = self.w.post(&alice, &self.cv.clone(), acting, "m").unwrap();
                self.seq += 1;
                assert_eq!(m.seq, self.seq);
                for (i, am) in self.model.iter_mut().enumerate() {
                    if Some(i) == author {
                        continue;
                    }
                    am.deliveries.push((m.id.clone(), false));
                    match &mut am.open {
                        Some(o) => o.count += 1,
                        None => {
                            am.open = Some(OpenWake {
                                id: None,
                                count: 1,
                                claim: None,
                            })
                        }
                    }
                }
            }
            Op::ReadInbox(i) => {
                let Some(actor) = self.model[i].actor.clone() else {
                    return;
                };
                let inbox = self.w.store.read_inbox(&alice, &actor, 0, 200, false).unwrap();
                let got: Vec<(String, bool)> = inbox
                    .into_iter()
                    .map(|d| (d.message.id, d.state == DeliveryState::Consumed))
                    .collect();
                assert_eq!(got, self.model[i].deliveries);
            }
            Op::ConsumeDelivery(i, k) => {
                let am = &mut self.model[i];
                let Some(actor) = am.actor.clone() else { return };
                if am.deliveries.is_empty() {
                    return;
                }
                let idx = k % am.deliveries.len();
                let m = self
                    .w
                    .store
                    .consume_delivery(&alice, &actor, &am.deliveries[idx].0)
                    .unwrap();
                assert_eq!(m.state_changed, !am.deliveries[idx].1);
                am.deliveries[idx].1 = true;
            }
            Op::Claim(i) => {
                let am = &mut self.model[i];
                let Some(actor) = am.actor.clone() else { return };
                if let Some(o) = &mut am.open
                    && o.claim.as_ref().is_some_and(|c| now >= c.expires)
                {
                    o.claim = None;
                }
                // A turn already running for the agent (a wake dispatched through this endpoint,
                // neither consumed nor found unknown) bars claiming another.
                let unresolved = am.fenced.iter().any(|f| {
                    f.endpoint == actor.endpoint && matches!(f.state, AttemptState::Dispatched | AttemptState::Accepted)
                });
                let claimable = am.open.as_ref().is_some_and(|o| o.claim.is_none());
                let got = self.w.store.claim_wake(&alice, &actor, CLAIM);
                if unresolved && claimable {
                    assert!(matches!(got, Err(Error::LimitReached { limit: 1, .. })), "{got:?}");
                    return;
                }
                let got = got.unwrap();
                match (&mut am.open, got) {
                    (Some(o), Some(c)) if o.claim.is_none() => {
                        assert_eq!(c.wake.delivery_count, o.count);
                        if let Some(id) = &o.id {
                            assert_eq!(&c.wake.id, id, "a released wake comes back as itself");
                        }
                        o.id = Some(c.wake.id.clone());
                        o.claim = Some(Claim {
                            attempt: c.attempt.id,
                            expires: c.attempt.claim_expires_at,
                        });
                    }
                    (o, got) => assert!(
                        got.is_none() && o.as_ref().is_none_or(|o| o.claim.is_some()),
                        "unexpected claim {got:?} for model {o:?}"
                    ),
                }
            }
            Op::Dispatch(i) => {
                let am = &mut self.model[i];
                let Some(actor) = am.actor.clone() else { return };
                let Some(o) = am.open.clone() else { return };
                let Some(claim) = o.claim.clone() else { return };
                let got = self.w.store.prepare_dispatch(&alice, &actor, &claim.attempt);
                if now >= claim.expires {
                    assert!(matches!(got, Err(Error::ClaimExpired(_))), "{got:?}");
                    am.open.as_mut().unwrap().claim = None;
                } else {
                    let t = got.unwrap();
                    assert_eq!(t.wake.delivery_count, o.count);
                    am.fenced.push(Fenced {
                        wake: t.wake.id,
                        attempt: t.attempt.id,
                        endpoint: actor.endpoint.clone(),
                        token: t.consume_token,
                        state: AttemptState::Dispatched,
                    });
                    am.open = None;
                }
            }
            Op::Finish(i, accepted) => {
                let am = &mut self.model[i];
                let Some(actor) = am.actor.clone() else { return };
                let Some(f) = am
                    .fenced
                    .iter_mut()
                    .rev()
                    .find(|f| f.endpoint == actor.endpoint && f.state == AttemptState::Dispatched)
                else {
                    return;
                };
                let outcome = if accepted {
                    DispatchOutcome::Accepted
                } else {
                    DispatchOutcome::Unknown
                };
                let a = self
                    .w
                    .store
                    .finish_dispatch(&alice, &actor, &f.attempt, outcome)
                    .unwrap();
                f.state = a.value.state;
            }
            Op::ConsumeWake(i, k) => {
                let am = &mut self.model[i];
                let Some(actor) = am.actor.clone() else { return };
                if am.fenced.is_empty() {
                    return;
                }
                let idx = k % am.fenced.len();
                let f = &mut am.fenced[idx];
                let got = self.w.store.consume_wake(&alice, &actor, &f.wake, &f.token);
                if f.endpoint == actor.endpoint {
                    let m = got.unwrap();
                    assert_eq!(m.state_changed, f.state != AttemptState::Consumed);
                    f.state = AttemptState::Consumed;
                } else {
                    assert!(matches!(got, Err(Error::ConsumeRefused { .. })), "{got:?}");
                }
            }
            Op::Detach(i) => {
                let Some(actor) = self.model[i].actor.clone() else {
                    return;
                };
                let m = self
                    .w
                    .store
                    .detach_endpoint(&alice, &actor.agent, &actor.endpoint)
                    .unwrap();
                assert!(m.state_changed);
                self.model[i].retire_endpoint();
            }
            Op::Attach(i) => {
                let agent = self.agents[i].clone();
                let actor = self.w.attach(&alice, &agent);
                self.model[i].retire_endpoint();
                self.model[i].actor = Some(actor);
            }
            Op::Reconcile => {
                self.w.store.reconcile_takeover().unwrap();
                for am in &mut self.model {
                    if let Some(o) = &mut am.open {
                        o.claim = None;
                    }
                    for f in &mut am.fenced {
                        if matches!(f.state, AttemptState::Dispatched | AttemptState::Accepted) {
                            f.state = AttemptState::DeliveryUnknown;
                        }
                    }
                    // The successor re-registers its carriers.
                    if let Some(a) = &am.actor {
                        self.w
                            .store
                            .register_wake_carrier(&a.agent, &a.endpoint, a.generation)
                            .unwrap();
                    }
                }
            }
            Op::Advance(secs) => {
                self.w.clock.advance(Duration::from_secs(secs));
                for am in &self.model {
                    if let Some(a) = &am.actor {
                        self.w.store.renew_endpoint(&alice, a, LEASE).unwrap();
                    }
                }
            }
        }
    }

    fn check(&mut self) {
        let conn = self.w.store.autocommit();
        let seqs: Vec<i64> = conn
            .prepare("SELECT seq FROM messages ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(seqs, (1..=self.seq as i64).collect::<Vec<_>>(), "seqs contiguous");
        for (agent, am) in self.agents.iter().zip(&self.model) {
            let deliveries: Vec<(String, bool)> = conn
                .prepare(
                    "SELECT message_id, state = 'consumed' FROM deliveries WHERE recipient_agent_id = ?1 ORDER BY delivery_order",
                )
                .unwrap()
                .query_map([&agent.id], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(deliveries, am.deliveries, "no lost or duplicated deliveries");
            let open: Vec<(String, String, i64)> = conn
                .prepare("SELECT id, state, delivery_count FROM wakes WHERE agent_id = ?1 AND state IN ('pending', 'claimed')")
                .unwrap()
                .query_map([&agent.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(open.len() <= 1, "at most one open wake per agent");
            match (&am.open, open.first()) {
                (None, None) => {}
                (Some(o), Some((id, state, count))) => {
                    assert_eq!(*count as u64, o.count);
                    assert_eq!(state, if o.claim.is_some() { "claimed" } else { "pending" });
                    if let Some(mid) = &o.id {
                        assert_eq!(mid, id);
                    }
                }
                (m, d) => panic!("open wake mismatch: model {m:?}, database {d:?}"),
            }
            let counted: i64 = conn
                .query_row(
                    "SELECT coalesce(sum(delivery_count), 0) FROM wakes WHERE agent_id = ?1",
                    [&agent.id],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(
                counted as usize,
                am.deliveries.len(),
                "every delivery in exactly one wake"
            );
            for f in &am.fenced {
                let (state, live): (String, i64) = conn
                    .query_row(
                        "SELECT a.state, (SELECT count(*) FROM wake_attempts b WHERE b.wake_id = a.wake_id AND b.state = 'claimed')
                         FROM wake_attempts a WHERE a.id = ?1",
                        [&f.attempt],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .unwrap();
                assert_eq!(state, f.state.as_str());
                assert_eq!(live, 0, "a fenced wake is never claimed again");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_interleavings_match_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let mut h = Harness::new();
        for op in &ops {
            h.apply(op);
            h.check();
        }
    }
}
