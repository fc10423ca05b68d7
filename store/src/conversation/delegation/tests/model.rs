//! A model-based property test: random interleavings of task terminal facts (attempt
//! completions and cancellations), wait registrations (generic and Goal-scoped, `any` and
//! `all`) and wait cancellations, checked after every step against an in-memory model.
//!
//! Invariants: every wait's state is the model's; a wait has exactly one Wait-origin wake cause
//! once its condition held while it was waiting, and none before (at most one ever); each task
//! has exactly the model's attention events (one per terminal attempt of a goal task, none while
//! a Goal-scoped wait over it is waiting or triggered, none for cancellations, no backfill after
//! a cancel); refusals are the model's; and the independent SQL check finds nothing.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::conversation::delegation::bounds::MAX_WAITING_WAITS_PER_AGENT;

/// Tasks 0 and 1 serve the goal; 2 and 3 do not. Even tasks go to worker 1, odd to worker 2.
const TASKS: usize = 4;

fn serves_goal(i: usize) -> bool {
    i < 2
}

#[derive(Debug, Clone)]
enum Op {
    Finish(usize, bool),
    CancelTask(usize),
    Register(u8, bool, bool),
    CancelWait(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..TASKS, any::<bool>()).prop_map(|(t, ok)| Op::Finish(t, ok)),
        1 => (0..TASKS).prop_map(Op::CancelTask),
        // Half the registrations name only goal tasks, so Goal-scoped waits are often accepted.
        3 => (prop_oneof![1u8..4, 1u8..16], any::<bool>(), any::<bool>())
            .prop_map(|(m, all, scoped)| Op::Register(m, all, scoped)),
        1 => any::<usize>().prop_map(Op::CancelWait),
    ]
}

#[derive(Debug, Clone)]
struct ModelWait {
    id: String,
    sources: Vec<usize>,
    all: bool,
    scoped: bool,
    state: WaitState,
    matched: BTreeSet<usize>,
    fired: u32,
}

#[derive(Debug, Default)]
struct Model {
    terminal: [Option<TaskState>; TASKS],
    attention: [i64; TASKS],
    waits: Vec<ModelWait>,
}

impl Model {
    /// Task `i`'s terminal fact reaches the waits over it.
    fn fact(&mut self, i: usize) {
        for w in &mut self.waits {
            if w.state == WaitState::Cancelled || !w.sources.contains(&i) || !w.matched.insert(i) {
                continue;
            }
            let due = if w.all {
                w.matched.len() == w.sources.len()
            } else {
                true
            };
            if w.state == WaitState::Waiting && due {
                w.state = WaitState::Triggered;
                w.fired += 1;
            }
        }
    }

    fn suppressed(&self, i: usize) -> bool {
        self.waits
            .iter()
            .any(|w| w.scoped && w.state != WaitState::Cancelled && w.sources.contains(&i))
    }
}

fn run(ops: Vec<Op>) {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let tasks: Vec<AgentTask> = (0..TASKS)
        .map(|i| {
            let assignee = if i % 2 == 0 { &t.w1 } else { &t.w2 };
            w.task(&alice, &t.boss(), assignee, serves_goal(i).then_some(&g), true)
        })
        .collect();
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Finish(i, ok) => {
                let actor = if i % 2 == 0 { &t.w1_ep } else { &t.w2_ep };
                let outcome = if ok {
                    TaskOutcome::Succeeded
                } else {
                    TaskOutcome::Failed
                };
                let got = w.complete(&alice, actor, &tasks[i], outcome, "r");
                let want = if ok { TaskState::Succeeded } else { TaskState::Failed };
                match m.terminal[i] {
                    None => {
                        assert_eq!(got.unwrap().value.state, want);
                        m.terminal[i] = Some(want);
                        if serves_goal(i) && !m.suppressed(i) {
                            m.attention[i] += 1;
                        }
                        m.fact(i);
                    }
                    Some(s) if s == want => assert!(got.unwrap().replayed),
                    Some(_) => assert!(got.is_err()),
                }
            }
            Op::CancelTask(i) => {
                let got = w.store.cancel_agent_task(&alice, &Acting::Human, &tasks[i].id);
                match m.terminal[i] {
                    None => {
                        assert!(got.unwrap().state_changed);
                        m.terminal[i] = Some(TaskState::Cancelled);
                        m.fact(i);
                    }
                    Some(TaskState::Cancelled) => assert!(!got.unwrap().state_changed),
                    Some(_) => assert!(matches!(got, Err(ConversationError::InvalidTaskState { .. }))),
                }
            }
            Op::Register(mask, all, scoped) => {
                let sources: Vec<usize> = (0..TASKS).filter(|i| mask & (1 << i) != 0).collect();
                let refs: Vec<&AgentTask> = sources.iter().map(|&i| &tasks[i]).collect();
                let mode = if all { WaitMode::All } else { WaitMode::Any };
                let got = w.wait(&alice, &t.boss_ep, &refs, mode, scoped.then_some(&g));
                let refused = scoped && sources.iter().any(|&i| !serves_goal(i) || m.terminal[i].is_some());
                let waiting = m.waits.iter().filter(|w| w.state == WaitState::Waiting).count() as u64;
                if refused {
                    assert!(
                        matches!(got, Err(ConversationError::WaitSourceRefused { .. })),
                        "{got:?}"
                    );
                } else if waiting >= MAX_WAITING_WAITS_PER_AGENT {
                    assert!(matches!(got, Err(ConversationError::LimitReached { .. })), "{got:?}");
                } else {
                    let got = got.unwrap();
                    let mut mw = ModelWait {
                        id: got.id,
                        sources: sources.clone(),
                        all,
                        scoped,
                        state: WaitState::Waiting,
                        matched: BTreeSet::new(),
                        fired: 0,
                    };
                    mw.matched = sources.iter().copied().filter(|&i| m.terminal[i].is_some()).collect();
                    if !mw.matched.is_empty() && (!all || mw.matched.len() == sources.len()) {
                        mw.state = WaitState::Triggered;
                        mw.fired = 1;
                    }
                    m.waits.push(mw);
                }
            }
            Op::CancelWait(k) => {
                if m.waits.is_empty() {
                    continue;
                }
                let n = m.waits.len();
                let mw = &mut m.waits[k % n];
                let got = w.store.cancel_agent_wait(&alice, &Acting::Human, &mw.id).unwrap();
                assert_eq!(got.state_changed, mw.state != WaitState::Cancelled);
                mw.state = WaitState::Cancelled;
            }
        }
        // Every wait agrees with the model, and fired at most once.
        for mw in &m.waits {
            let got = w.store.read_agent_wait(&alice, &t.boss(), &mw.id).unwrap();
            assert_eq!(got.state, mw.state, "{mw:?}");
            assert!(mw.fired <= 1);
            assert_eq!(w.causes("wait", &mw.id), i64::from(mw.fired), "{mw:?}");
            assert_eq!(got.wake_id.is_some(), mw.fired == 1);
        }
        for (i, task) in tasks.iter().enumerate() {
            let sql = format!("SELECT count(*) FROM attention_events WHERE task_id = '{}'", task.id);
            assert_eq!(w.count(&sql), m.attention[i], "attention for task {i}");
        }
        assert_eq!(
            crate::conversation::delegation::check::violations(&w.store.autocommit()).unwrap(),
            vec![]
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn interleavings_fire_each_wait_at_most_once_and_suppress_exactly(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
