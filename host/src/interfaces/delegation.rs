//! `ahp:agent/delegation`: a turn hands work to other agents of its owner (tasks and their
//! attempts), sleeps until it is done (waits), keeps workflow truth (goals) and reads why it was
//! told (attention events).
//!
//! Every call acts for the transfer's owner as the agent, through the exact endpoint and
//! controller generation whose carrier the host holds ([`TurnCtx`]), so the store's endpoint
//! admission, visibility (existence hiding), roles and bounds apply as to any other caller.
//! The writes that create something take their idempotency key from the turn's wake id and
//! their index among the turn's calls of that function (`turn/{wake}/{function}/{index}`): the
//! same wake's turn, run again, resolves to what it already created. Calls are counted per turn
//! ([`MAX_DELEGATION_CALLS_PER_TURN`], of which at most [`MAX_DELEGATION_WRITES_PER_TURN`]
//! writes). Each call adapts one operation of [`Delegation`](crate::ops::Delegation), which
//! schedules exactly the agents a write woke. Outside a turn (`resume`) every call is
//! `no-wake`.

use ahp_store::conversation::ConversationError as StoreError;
use ahp_store::delegation::{
    GoalCheckpoint, NewGoal as StoreNewGoal, NewTask as StoreNewTask, NewWait, TaskCompletion, TaskQuery,
};

use super::bindings::v0_3::ahp::agent::delegation::{
    AttentionEvent, Error, Goal, Host, NewGoal, NewTask, Outcome, PlanStep, Task, TaskRole, TaskState, Wait, WaitMode,
};
use super::context::{AgentCtx, TurnCtx};
use crate::carrier::{Carriers, NoCarriers};

/// Delegation calls one turn may make: reads and writes together, as many as inbox and
/// transcript reads.
pub const MAX_DELEGATION_CALLS_PER_TURN: u32 = 1024;
/// Delegation writes one turn may make (creating, completing, cancelling, registering,
/// checkpointing): each is a durable commit, and a coordinator fanning out to its workers
/// needs a task and a wait per worker — far fewer than this.
pub const MAX_DELEGATION_WRITES_PER_TURN: u32 = 64;
/// Largest page one `list-tasks` call returns.
pub const MAX_PAGE: u32 = 64;

/// The functions whose writes take a turn-scoped idempotency key, one index sequence each.
#[derive(Debug, Clone, Copy)]
pub(super) enum Keyed {
    CreateTask,
    RegisterWait,
    CreateGoal,
    CheckpointGoal,
}

/// The idempotency key of the `index`-th call of `what` in the turn of wake `wake`: the same
/// wake's turn, run again, makes the same calls in the same order and so resolves to what it
/// created the first time. Printable ASCII, far below the store's 128-byte bound (a wake id is
/// under 40 bytes).
fn turn_key(wake: &str, what: Keyed, index: u32) -> String {
    let what = match what {
        Keyed::CreateTask => "create-task",
        Keyed::RegisterWait => "register-wait",
        Keyed::CreateGoal => "create-goal",
        Keyed::CheckpointGoal => "checkpoint-goal",
    };
    format!("turn/{wake}/{what}/{index}")
}

impl Host for AgentCtx {
    fn create_task(&mut self, task: NewTask) -> Result<Task, Error> {
        let (turn, key) = self.keyed_write(Keyed::CreateTask)?;
        let new = StoreNewTask {
            assignee: task.assignee,
            title: task.title,
            instructions: task.instructions,
            goal: task.goal_id,
            start: true,
        };
        let m = self.delegation(|d| d.create_task(&turn.caller, &turn.acting(), &new, &key))?;
        Ok(m.value.into())
    }

    fn get_task(&mut self, task_id: String) -> Result<Task, Error> {
        let turn = self.read()?;
        Ok(self
            .delegation(|d| d.task(&turn.caller, &turn.acting(), &task_id))?
            .into())
    }

    fn list_tasks(
        &mut self,
        role: TaskRole,
        state: Option<TaskState>,
        after: Option<String>,
        limit: u32,
    ) -> Result<Vec<Task>, Error> {
        let turn = self.read()?;
        if limit > MAX_PAGE {
            return Err(Error::LimitTooLarge(MAX_PAGE));
        }
        let me = Some(turn.actor.agent.clone());
        let (assignee, creator) = match role {
            TaskRole::Assigned => (me, None),
            TaskRole::Created => (None, me),
        };
        let query = TaskQuery {
            assignee,
            creator,
            state: state.map(Into::into),
            goal: None,
            after,
        };
        let page = self.delegation(|d| d.tasks(&turn.caller, &turn.acting(), &query, limit as usize))?;
        Ok(page.items.into_iter().map(Into::into).collect())
    }

    fn complete_attempt(&mut self, attempt_id: String, outcome: Outcome, result: String) -> Result<Task, Error> {
        let turn = self.write()?;
        let done = TaskCompletion {
            attempt: attempt_id,
            outcome: outcome.into(),
            result,
        };
        let m = self.delegation(|d| d.complete_attempt(&turn.caller, &turn.actor, &done))?;
        Ok(m.value.into())
    }

    fn cancel_task(&mut self, task_id: String) -> Result<Task, Error> {
        let turn = self.write()?;
        let m = self.delegation(|d| d.cancel_task(&turn.caller, &turn.acting(), &task_id))?;
        Ok(m.value.into())
    }

    fn register_wait(&mut self, sources: Vec<String>, mode: WaitMode, goal_id: Option<String>) -> Result<Wait, Error> {
        let keyed = self.keyed_write(Keyed::RegisterWait)?;
        self.registered_wait(keyed, sources, mode, goal_id)
    }

    fn read_wait(&mut self, wait_id: String) -> Result<Wait, Error> {
        let turn = self.read()?;
        Ok(self
            .delegation(|d| d.wait(&turn.caller, &turn.acting(), &wait_id))?
            .into())
    }

    fn cancel_wait(&mut self, wait_id: String) -> Result<Wait, Error> {
        let turn = self.write()?;
        let m = self.delegation(|d| d.cancel_wait(&turn.caller, &turn.acting(), &wait_id))?;
        Ok(m.value.into())
    }

    fn create_goal(&mut self, goal: NewGoal) -> Result<Goal, Error> {
        let keyed = self.keyed_write(Keyed::CreateGoal)?;
        self.created_goal(keyed, goal)
    }

    fn get_goal(&mut self, goal_id: String) -> Result<Goal, Error> {
        let turn = self.read()?;
        Ok(self
            .delegation(|d| d.goal(&turn.caller, &turn.acting(), &goal_id))?
            .into())
    }

    fn checkpoint_goal(
        &mut self,
        goal_id: String,
        expected_revision: u64,
        plan: Vec<PlanStep>,
        note: String,
    ) -> Result<Goal, Error> {
        let keyed = self.keyed_write(Keyed::CheckpointGoal)?;
        self.checkpointed_goal(keyed, goal_id, expected_revision, plan, note)
    }

    fn complete_goal(&mut self, goal_id: String) -> Result<Goal, Error> {
        let turn = self.write()?;
        let m = self.delegation(|d| d.complete_goal(&turn.caller, &turn.acting(), &goal_id))?;
        Ok(m.value.into())
    }

    fn get_attention_event(&mut self, event_id: String) -> Result<AttentionEvent, Error> {
        let turn = self.read()?;
        let event = self.delegation(|d| d.attention_event(&turn.caller, &turn.acting(), &event_id))?;
        AttentionEvent::of(event)
            .ok_or_else(|| Error::Refused("a goal_workflow_stalled attention has no task: read its goal".into()))
    }
}

impl AgentCtx {
    /// `register-wait` under its key (see [`Self::keyed_write`]), its arguments copied.
    pub(super) fn registered_wait(
        &mut self,
        (turn, key): (TurnCtx, String),
        sources: Vec<String>,
        mode: WaitMode,
        goal_id: Option<String>,
    ) -> Result<Wait, Error> {
        let new = NewWait {
            sources,
            mode: mode.into(),
            goal: goal_id,
        };
        // A wait whose condition already held fired at registration: its wake is this agent's,
        // run after this turn (the operation schedules whom the call woke).
        let m = self.delegation(|d| d.register_wait(&turn.caller, &turn.actor, &new, &key))?;
        Ok(m.value.into())
    }

    /// `create-goal` under its key, its arguments copied.
    pub(super) fn created_goal(&mut self, (turn, key): (TurnCtx, String), goal: NewGoal) -> Result<Goal, Error> {
        let new = StoreNewGoal {
            title: goal.title,
            completion_intent: goal.completion_intent,
            plan: goal.plan.into_iter().map(Into::into).collect(),
            controller: goal.controller,
        };
        let m = self.delegation(|d| d.create_goal(&turn.caller, &turn.acting(), &new, &key))?;
        Ok(m.value.into())
    }

    /// `checkpoint-goal` under its key, its arguments copied.
    pub(super) fn checkpointed_goal(
        &mut self,
        (turn, key): (TurnCtx, String),
        goal_id: String,
        expected_revision: u64,
        plan: Vec<PlanStep>,
        note: String,
    ) -> Result<Goal, Error> {
        let checkpoint = GoalCheckpoint {
            goal: goal_id,
            expected_revision,
            plan: plan.into_iter().map(Into::into).collect(),
            note,
        };
        let m = self.delegation(|d| d.checkpoint_goal(&turn.caller, &turn.acting(), &checkpoint, &key))?;
        Ok(m.value.into())
    }

    /// Runs `op` on the [delegation operations](crate::ops::Delegation) over the store, its
    /// refusal as the interface's error.
    fn delegation<T>(
        &self,
        op: impl FnOnce(&mut crate::ops::Delegation<'_>) -> ahp_store::conversation::ConversationResult<T>,
    ) -> Result<T, Error> {
        let carriers = self.carriers();
        self.db(|db| op(&mut crate::ops::Delegation::new(db, carriers.as_ref())))
            .map_err(refusal)
    }
}

impl AgentCtx {
    /// The turn, for one more delegation call.
    fn read(&mut self) -> Result<TurnCtx, Error> {
        let turn = self.turn.as_ref().ok_or(Error::NoWake)?.clone();
        self.calls.delegation += 1;
        if self.calls.delegation > MAX_DELEGATION_CALLS_PER_TURN {
            return Err(Error::TooManyCalls(MAX_DELEGATION_CALLS_PER_TURN));
        }
        Ok(turn)
    }

    /// The turn, for one more delegation write.
    fn write(&mut self) -> Result<TurnCtx, Error> {
        let turn = self.read()?;
        self.calls.delegation_writes += 1;
        if self.calls.delegation_writes > MAX_DELEGATION_WRITES_PER_TURN {
            return Err(Error::TooManyCalls(MAX_DELEGATION_WRITES_PER_TURN));
        }
        Ok(turn)
    }

    /// The turn and the idempotency key of one more write of `what`. The index is spent
    /// whatever the outcome: a refused write is an intentional operation too, and a retried
    /// turn makes the same calls in the same order.
    pub(super) fn keyed_write(&mut self, what: Keyed) -> Result<(TurnCtx, String), Error> {
        let turn = self.write()?;
        let counts = &mut self.calls.delegation_keys;
        let slot = match what {
            Keyed::CreateTask => &mut counts[0],
            Keyed::RegisterWait => &mut counts[1],
            Keyed::CreateGoal => &mut counts[2],
            Keyed::CheckpointGoal => &mut counts[3],
        };
        let index = *slot;
        *slot += 1;
        let key = turn_key(&turn.wake.id, what, index);
        Ok((turn, key))
    }

    fn carriers(&self) -> std::sync::Arc<dyn Carriers> {
        self.carriers
            .upgrade()
            .unwrap_or_else(|| std::sync::Arc::new(NoCarriers))
    }
}

/// The interface's error for a store refusal. Existence hiding carries through: whatever the
/// store does not show this agent is `not-found`, with no detail that would tell a hidden id
/// from a missing one.
fn refusal(e: StoreError) -> Error {
    match e {
        StoreError::InvalidInput { field, reason } => Error::Invalid(format!("{field}: {reason}")),
        StoreError::TaskNotFound(_)
        | StoreError::TaskAttemptNotFound(_)
        | StoreError::WaitNotFound(_)
        | StoreError::GoalNotFound(_)
        | StoreError::AttentionEventNotFound(_)
        | StoreError::AgentNotFound(_) => Error::NotFound,
        StoreError::GoalRevisionConflict { current, .. } => Error::RevisionConflict(current),
        StoreError::Database(e) => Error::Unavailable(e.to_string()),
        StoreError::CorruptRow { .. } => Error::Unavailable(e.to_string()),
        other => Error::Refused(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ahp_store::conversation::{
        AgentActor, AgentCard, Caller, IdempotencyKey, NewConversation, NewMessage, Wake as StoreWake,
    };

    use super::super::bindings::v0_3::ahp::agent::delegation::{GoalState, StepStatus, WaitState};
    use super::*;
    use crate::interfaces::context::test_support::state;
    use crate::shared_store::StoreLock;
    use ahp_store::delegation::Acting;

    #[test]
    fn turn_keys_are_distinct_per_function_and_index_and_fit_the_store_bound() {
        let wake = &format!("wk_{}", "f".repeat(37));
        let a = turn_key(wake, Keyed::CreateTask, 0);
        assert_ne!(a, turn_key(wake, Keyed::CreateTask, 1));
        assert_ne!(a, turn_key(wake, Keyed::RegisterWait, 0));
        assert_ne!(a, turn_key("wk_other", Keyed::CreateTask, 0));
        let longest = turn_key(wake, Keyed::CheckpointGoal, u32::MAX);
        assert!(longest.len() <= ahp_store::conversation::bounds::MAX_IDEMPOTENCY_KEY_BYTES);
        assert!(longest.bytes().all(|b| b.is_ascii_graphic()));
    }

    #[test]
    fn hidden_and_missing_ids_are_the_same_not_found() {
        for e in [
            StoreError::TaskNotFound("tsk_a".into()),
            StoreError::WaitNotFound("wait_b".into()),
            StoreError::GoalNotFound("goal_c".into()),
            StoreError::AttentionEventNotFound("att_d".into()),
            StoreError::TaskAttemptNotFound("tka_e".into()),
        ] {
            assert!(matches!(refusal(e), Error::NotFound));
        }
    }

    /// An owner with a coordinator and a worker, each attached, and a turn of each: the
    /// coordinator's for a human message, the worker's for nothing yet.
    struct Owner {
        caller: Caller,
        boss: AgentActor,
        worker: AgentActor,
        boss_wake: StoreWake,
    }

    fn owner(ctx: &AgentCtx, subject: &str) -> Owner {
        let caller = Caller::full(subject).unwrap();
        let mut db = ctx.db.locked();
        let card = |h: &str| AgentCard {
            handle: h.into(),
            display_name: h.into(),
            description: String::new(),
            specialties: Vec::new(),
        };
        let mut attach = |h: &str| {
            let agent = db.create_agent(&caller, &card(h), &format!("a-{h}")).unwrap().value;
            AgentActor::of(
                &db.attach_endpoint(&caller, &agent.id, Duration::from_secs(600), &format!("e-{h}"))
                    .unwrap()
                    .value,
            )
        };
        let boss = attach("boss");
        let worker = attach("worker");
        let cv = db
            .create_conversation(
                &caller,
                &NewConversation {
                    title: "q".into(),
                    agents: vec![boss.agent.clone()],
                },
                "cv",
            )
            .unwrap()
            .value;
        let ask = NewMessage {
            conversation: cv.id,
            acting: Acting::Human,
            body: "how many words?".into(),
            reply_to: None,
            idempotency: IdempotencyKey::Key("m-1".into()),
        };
        db.post_message(&caller, &ask).unwrap();
        let boss_wake = db.list_wakes(&caller, &boss, 1).unwrap().remove(0);
        Owner {
            caller,
            boss,
            worker,
            boss_wake,
        }
    }

    fn turn(caller: &Caller, actor: &AgentActor, wake: &StoreWake) -> Option<TurnCtx> {
        Some(TurnCtx {
            caller: caller.clone(),
            actor: actor.clone(),
            wake: wake.clone(),
            queued: 0,
            replies: 0,
        })
    }

    fn ask(worker: &str, title: &str) -> NewTask {
        NewTask {
            assignee: worker.into(),
            title: title.into(),
            instructions: "count the words of: to be or not to be".into(),
            goal_id: None,
        }
    }

    #[test]
    fn outside_a_turn_every_call_is_no_wake_and_changes_nothing() {
        let (mut ctx, _dir) = state(0, ahp_store::Tier::Nano);
        let o = owner(&ctx, "account:alice");
        ctx.start_turn(None);
        assert!(matches!(ctx.create_task(ask(&o.worker.agent, "t")), Err(Error::NoWake)));
        assert!(matches!(ctx.get_task("tsk_x".into()), Err(Error::NoWake)));
        assert!(matches!(
            ctx.register_wait(vec!["tsk_x".into()], WaitMode::All, None),
            Err(Error::NoWake)
        ));
        assert!(matches!(ctx.get_goal("goal_x".into()), Err(Error::NoWake)));
        let tasks = ctx
            .db
            .locked()
            .list_agent_tasks(&o.caller, &Acting::Human, &TaskQuery::default(), 64)
            .unwrap();
        assert!(tasks.is_empty());
    }

    #[test]
    fn a_task_runs_through_its_attempt_to_the_wait_and_a_rerun_turn_creates_nothing_twice() {
        let (mut ctx, _dir) = state(0, ahp_store::Tier::Nano);
        let o = owner(&ctx, "account:alice");
        ctx.start_turn(turn(&o.caller, &o.boss, &o.boss_wake));
        let task = ctx.create_task(ask(&o.worker.agent, "count")).unwrap();
        assert_eq!(task.state, TaskState::Running);
        assert_eq!(task.creator.as_deref(), Some(o.boss.agent.as_str()));
        let attempt = task.current_attempt.clone().unwrap();
        let wait = ctx.register_wait(vec![task.id.clone()], WaitMode::All, None).unwrap();
        assert_eq!(wait.state, WaitState::Waiting);

        // The same wake's turn runs again: the same calls resolve to the same task and wait.
        ctx.start_turn(turn(&o.caller, &o.boss, &o.boss_wake));
        let again = ctx.create_task(ask(&o.worker.agent, "count")).unwrap();
        assert_eq!(again.id, task.id);
        assert_eq!(
            ctx.register_wait(vec![task.id.clone()], WaitMode::All, None)
                .unwrap()
                .id,
            wait.id
        );
        // A second task in that turn is a new one.
        let second = ctx.create_task(ask(&o.worker.agent, "count again")).unwrap();
        assert_ne!(second.id, task.id);
        let created = ctx.list_tasks(TaskRole::Created, None, None, 64).unwrap();
        assert_eq!(created.len(), 2);
        assert!(ctx.list_tasks(TaskRole::Assigned, None, None, 64).unwrap().is_empty());

        // The worker's turn for the attempt's wake finishes it: the wait fires.
        let worker_wake = {
            let mut db = ctx.db.locked();
            db.list_wakes(&o.caller, &o.worker, 1).unwrap().remove(0)
        };
        assert_eq!(worker_wake.id, attempt.wake_id);
        ctx.start_turn(turn(&o.caller, &o.worker, &worker_wake));
        let mine = ctx
            .list_tasks(TaskRole::Assigned, Some(TaskState::Running), None, 64)
            .unwrap();
        assert_eq!(mine.len(), 2);
        // Another agent's attempt cannot be finished by the boss; the worker finishes its own.
        let done = ctx
            .complete_attempt(attempt.id.clone(), Outcome::Succeeded, "6 words".into())
            .unwrap();
        assert_eq!(done.state, TaskState::Succeeded);
        assert_eq!(done.result.as_deref(), Some("6 words"));
        ctx.start_turn(turn(&o.caller, &o.boss, &o.boss_wake));
        let fired = ctx.read_wait(wait.id.clone()).unwrap();
        assert_eq!(fired.state, WaitState::Triggered);
        assert_eq!(fired.sources[0].task_state, TaskState::Succeeded);
        assert!(fired.wake_id.is_some());
        assert!(matches!(
            ctx.complete_attempt(attempt.id, Outcome::Succeeded, "6 words".into()),
            Err(Error::NotFound | Error::Refused(_))
        ));
    }

    #[test]
    fn another_owners_task_is_exactly_a_missing_one() {
        let (mut ctx, _dir) = state(0, ahp_store::Tier::Nano);
        let alice = owner(&ctx, "account:alice");
        let bob = owner(&ctx, "account:bob");
        ctx.start_turn(turn(&bob.caller, &bob.boss, &bob.boss_wake));
        let bobs = ctx.create_task(ask(&bob.worker.agent, "bob's")).unwrap();
        ctx.start_turn(turn(&alice.caller, &alice.boss, &alice.boss_wake));
        let hidden = format!("{:?}", ctx.get_task(bobs.id.clone()).unwrap_err());
        let missing = format!("{:?}", ctx.get_task(format!("tsk_{}", "0".repeat(24))).unwrap_err());
        assert_eq!(hidden, missing);
        assert_eq!(hidden, "Error::NotFound");
        // Nor can alice hand bob's worker a task.
        assert!(matches!(
            ctx.create_task(ask(&bob.worker.agent, "steal")),
            Err(Error::NotFound)
        ));
        assert!(matches!(ctx.cancel_task(bobs.id), Err(Error::NotFound)));
    }

    #[test]
    fn goals_checkpoint_under_their_revision() {
        let (mut ctx, _dir) = state(0, ahp_store::Tier::Nano);
        let o = owner(&ctx, "account:alice");
        ctx.start_turn(turn(&o.caller, &o.boss, &o.boss_wake));
        let step = |t: &str, status| PlanStep {
            title: t.into(),
            status,
        };
        let goal = ctx
            .create_goal(NewGoal {
                title: "answer".into(),
                completion_intent: "the human has the word count".into(),
                plan: vec![step("fan out", StepStatus::InProgress)],
                controller: Some(o.boss.agent.clone()),
            })
            .unwrap();
        assert_eq!(goal.revision, 1);
        let next = ctx
            .checkpoint_goal(
                goal.id.clone(),
                1,
                vec![step("fan out", StepStatus::Done)],
                "sent".into(),
            )
            .unwrap();
        assert_eq!(next.revision, 2);
        assert!(matches!(
            ctx.checkpoint_goal(goal.id.clone(), 1, vec![], "stale".into()),
            Err(Error::RevisionConflict(2))
        ));
        let too_many = (0..=ahp_store::delegation::bounds::MAX_PLAN_STEPS)
            .map(|i| step(&format!("s{i}"), StepStatus::Pending))
            .collect();
        assert!(matches!(
            ctx.checkpoint_goal(goal.id.clone(), 2, too_many, String::new()),
            Err(Error::Invalid(_))
        ));
        assert_eq!(ctx.get_goal(goal.id.clone()).unwrap().revision, 2);
        assert_eq!(ctx.complete_goal(goal.id).unwrap().state, GoalState::Completed);
    }

    #[test]
    fn a_turn_makes_at_most_64_writes_and_1024_calls() {
        let (mut ctx, _dir) = state(0, ahp_store::Tier::Nano);
        let o = owner(&ctx, "account:alice");
        ctx.start_turn(turn(&o.caller, &o.boss, &o.boss_wake));
        let nowhere = format!("wait_{}", "0".repeat(24));
        for _ in 0..MAX_DELEGATION_WRITES_PER_TURN {
            assert!(matches!(ctx.cancel_wait(nowhere.clone()), Err(Error::NotFound)));
        }
        // The next write is refused before it reaches the store, whatever it is.
        assert!(matches!(
            ctx.create_task(ask(&o.worker.agent, "one more")),
            Err(Error::TooManyCalls(64))
        ));
        for _ in ctx.calls.delegation..MAX_DELEGATION_CALLS_PER_TURN {
            assert!(matches!(
                ctx.get_goal(format!("goal_{}", "0".repeat(24))),
                Err(Error::NotFound)
            ));
        }
        assert!(matches!(ctx.get_task("tsk_x".into()), Err(Error::TooManyCalls(1024))));
        // Nothing was created; the next turn counts again.
        ctx.start_turn(turn(&o.caller, &o.boss, &o.boss_wake));
        assert!(ctx.create_task(ask(&o.worker.agent, "next turn")).is_ok());
        assert!(matches!(
            ctx.list_tasks(TaskRole::Created, None, None, MAX_PAGE + 1),
            Err(Error::LimitTooLarge(64))
        ));
    }
}
