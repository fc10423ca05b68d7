//! Tests of the delegation domain, through the public `Store` methods.
//!
//! - `tasks`: creation, idempotency, starting attempts, wake origins and coalescing, cancel;
//! - `attempts`: exact and idempotent completion, revocation before the fence,
//!   `delivery_unknown` after it (endpoint gone, takeover), never re-run;
//! - `waits`: any/all, one-shot, already-holding at registration, cancel;
//! - `goals`: creation, revision-fenced idempotent checkpoints, complete/abandon;
//! - `attention`: routing to the controller or creator, Goal-scoped wait precedence;
//! - `limits`: every bound at the limit and one past it;
//! - `hiding`: another principal's ids are not found exactly like missing ones;
//! - `model`: a proptest model of interleaved terminal facts, registrations and cancellations;
//! - `check`: the independent SQL check finds what it should;
//! - `concurrency`: eight connections finishing an `all` wait's sources at once;
//! - `upgrade`: a schema-8 database keeps its wakes across the rebuild of `wakes`;
//! - `fail_closed`: unknown persisted states and origins are refused;
//! - `woken`: each write reports exactly whom it woke;
//! - `stall`: the Goal Plan card's observations and the one `goal_workflow_stalled` attention
//!   per epoch of meaningful work.

mod attempts;
mod attention;
mod check;
mod concurrency;
mod fail_closed;
mod goals;
mod hiding;
mod limits;
mod model;
mod stall;
mod tasks;
mod upgrade;
mod waits;
mod woken;

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{ManualClock, Timestamp};
use crate::conversation::delegation::*;
use crate::conversation::*;
use crate::db::Store;

/// Default endpoint lease in tests.
pub(super) const LEASE: Duration = Duration::from_secs(600);

/// A store on a manual clock, with two principals.
pub(super) struct World {
    pub(super) store: Store,
    #[allow(dead_code)]
    pub(super) clock: ManualClock,
    pub(super) alice: Caller,
    pub(super) bob: Caller,
    keys: u64,
}

pub(super) fn world() -> World {
    let clock = ManualClock::new(Timestamp::from_micros(1_800_000_000_000_000));
    let store = crate::testing::store().unwrap().with_clock(Arc::new(clock.clone()));
    World {
        store,
        clock,
        alice: Caller::full("account:alice").unwrap(),
        bob: Caller::full("account:bob").unwrap(),
        keys: 0,
    }
}

impl World {
    pub(super) fn key(&mut self) -> String {
        self.keys += 1;
        format!("k-{}", self.keys)
    }

    pub(super) fn agent(&mut self, who: &Caller) -> Agent {
        let k = self.key();
        let card = AgentCard {
            handle: "helper".into(),
            display_name: "Helper".into(),
            description: String::new(),
            specialties: vec![],
        };
        self.store.create_agent(who, &card, &k).unwrap().value
    }

    /// A live, wake-capable endpoint for `agent`.
    pub(super) fn attach(&mut self, who: &Caller, agent: &Agent) -> AgentActor {
        let k = self.key();
        let ep = self.store.attach_endpoint(who, &agent.id, LEASE, &k).unwrap().value;
        self.store
            .register_wake_carrier(&ep.agent_id, &ep.id, ep.generation)
            .unwrap();
        AgentActor::of(&ep)
    }

    pub(super) fn new_task(assignee: &Agent, goal: Option<&Goal>, start: bool) -> NewTask {
        NewTask {
            assignee: assignee.id.clone(),
            title: "job".into(),
            instructions: "do the job".into(),
            goal: goal.map(|g| g.id.clone()),
            start,
        }
    }

    pub(super) fn task(
        &mut self,
        who: &Caller,
        acting: &Acting,
        assignee: &Agent,
        goal: Option<&Goal>,
        start: bool,
    ) -> AgentTask {
        let k = self.key();
        self.store
            .create_agent_task(who, acting, &Self::new_task(assignee, goal, start), &k)
            .unwrap()
            .value
    }

    pub(super) fn goal(&mut self, who: &Caller, acting: &Acting, controller: Option<&Agent>) -> Goal {
        let k = self.key();
        let new = NewGoal {
            title: "ship".into(),
            completion_intent: "it is shipped".into(),
            plan: vec![PlanStep {
                title: "build".into(),
                status: StepStatus::Pending,
            }],
            controller: controller.map(|a| a.id.clone()),
        };
        self.store.create_goal(who, acting, &new, &k).unwrap().value
    }

    pub(super) fn complete(
        &mut self,
        who: &Caller,
        actor: &AgentActor,
        task: &AgentTask,
        outcome: TaskOutcome,
        result: &str,
    ) -> ConversationResult<Mutation<AgentTask>> {
        let done = TaskCompletion {
            attempt: task.current_attempt.as_ref().expect("an attempt").id.clone(),
            outcome,
            result: result.into(),
        };
        self.store.complete_task_attempt(who, actor, &done)
    }

    pub(super) fn wait(
        &mut self,
        who: &Caller,
        actor: &AgentActor,
        sources: &[&AgentTask],
        mode: WaitMode,
        goal: Option<&Goal>,
    ) -> ConversationResult<AgentWait> {
        let k = self.key();
        let new = NewWait {
            sources: sources.iter().map(|t| t.id.clone()).collect(),
            mode,
            goal: goal.map(|g| g.id.clone()),
        };
        self.store.register_agent_wait(who, actor, &new, &k).map(|m| m.value)
    }

    /// The whole database, serialized: equal before and after means a call changed nothing.
    pub(super) fn bytes(&mut self) -> Vec<String> {
        crate::testing::dump(&mut self.store)
    }

    pub(super) fn count(&mut self, sql: &str) -> i64 {
        self.store.autocommit().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// How many wake causes of `origin` name `subject`.
    pub(super) fn causes(&mut self, origin: &str, subject: &str) -> i64 {
        self.store
            .autocommit()
            .query_row(
                "SELECT count(*) FROM wake_causes WHERE origin = ?1 AND subject_id = ?2",
                [origin, subject],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// The agent's open wake, if any.
    pub(super) fn open_wake(&mut self, actor: &AgentActor) -> Option<Wake> {
        let caller = self.alice.clone();
        self.store
            .list_wakes(&caller, actor, 10)
            .unwrap()
            .into_iter()
            .find(|w| matches!(w.state, WakeState::Pending | WakeState::Claimed))
    }

    /// Claims and dispatches the agent's open wake (the carrier crosses the dispatch fence).
    pub(super) fn dispatch(&mut self, actor: &AgentActor) -> DispatchTicket {
        let caller = self.alice.clone();
        let claim = self
            .store
            .claim_wake(&caller, actor, Duration::from_secs(30))
            .unwrap()
            .expect("a wake to claim");
        self.store.prepare_dispatch(&caller, actor, &claim.attempt.id).unwrap()
    }

    /// The coordinator and two workers of alice, each attached.
    pub(super) fn team(&mut self) -> Team {
        let alice = self.alice.clone();
        let boss = self.agent(&alice);
        let w1 = self.agent(&alice);
        let w2 = self.agent(&alice);
        Team {
            boss_ep: self.attach(&alice, &boss),
            w1_ep: self.attach(&alice, &w1),
            w2_ep: self.attach(&alice, &w2),
            boss,
            w1,
            w2,
        }
    }
}

/// A coordinator and two workers.
pub(super) struct Team {
    pub(super) boss: Agent,
    pub(super) boss_ep: AgentActor,
    pub(super) w1: Agent,
    pub(super) w1_ep: AgentActor,
    pub(super) w2: Agent,
    pub(super) w2_ep: AgentActor,
}

impl Team {
    pub(super) fn boss(&self) -> Acting {
        Acting::Agent(self.boss_ep.clone())
    }
}
