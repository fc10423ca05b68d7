//! The delegation operations — agent tasks and their attempts, waits, goals, attention
//! events — as every surface runs them (see [the module above](super)): the MCP tools
//! (`mcp/delegation_tools.rs`) and a turn's `ahp:agent/delegation` calls
//! (`interfaces/delegation.rs`).

use ahp_store::Store;
use ahp_store::conversation::mcp_task::McpTask;
use ahp_store::conversation::{AgentActor, Caller, ConversationResult as Result, Mutation};
use ahp_store::delegation::{
    Acting, AgentTask, AgentWait, AttentionEvent, Goal, GoalCheckpoint, GoalPlanObservation, NewGoal, NewTask, NewWait,
    TaskAttempt, TaskCompletion, TaskQuery,
};

use super::{Ops, Page};
use crate::carrier::Carriers;

/// The delegation operations ([`Ops`] opened on them).
pub struct Delegation<'a>(pub(super) Ops<'a>);

impl<'a> Delegation<'a> {
    /// The operations over `store`, scheduling the agents they wake on `carriers`.
    pub fn new(store: &'a mut Store, carriers: &'a dyn Carriers) -> Self {
        Self(Ops::new(store, carriers))
    }

    /// Renews the endpoint `acting` acts through ([`super::renew`]).
    fn renew(&mut self, caller: &Caller, acting: &Acting) -> Result<()> {
        self.0.renew(caller, acting)
    }

    /// After a keyed write: renews (unless it was a replay) and schedules whom it woke.
    fn keyed<T>(&mut self, caller: &Caller, acting: &Acting, m: Mutation<T>) -> Result<Mutation<T>> {
        if !m.replayed {
            self.renew(caller, acting)?;
        }
        Ok(self.woke(m))
    }

    /// Schedules whom the write `m` woke.
    fn woke<T>(&self, m: Mutation<T>) -> Mutation<T> {
        self.0.carriers.schedule_woken(&m.woken);
        m
    }

    /// Creates a task (keyed).
    ///
    /// # Errors
    ///
    /// The store's refusal or failure (as `create_agent_task`), or the renewal's.
    pub fn create_task(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        new: &NewTask,
        key: &str,
    ) -> Result<Mutation<AgentTask>> {
        let m = self.0.store.create_agent_task(caller, acting, new, key)?;
        self.keyed(caller, acting, m)
    }

    /// [`create_task`](Self::create_task), answered with the caller's MCP task that ends with
    /// the agent task (`track`; the store's `create_agent_task_tracked`).
    ///
    /// # Errors
    ///
    /// As `create_task`, and the caller's MCP task bound.
    pub fn create_task_tracked(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        new: &NewTask,
        key: &str,
        track: bool,
    ) -> Result<Mutation<(AgentTask, Option<McpTask>)>> {
        let m = self
            .0
            .store
            .create_agent_task_tracked(caller, acting, new, key, track)?;
        self.keyed(caller, acting, m)
    }

    /// One task.
    ///
    /// # Errors
    ///
    /// As `get_agent_task`, or the renewal's.
    pub fn task(&mut self, caller: &Caller, acting: &Acting, task: &str) -> Result<AgentTask> {
        self.renew(caller, acting)?;
        self.0.store.get_agent_task(caller, acting, task)
    }

    /// One task with its attempts.
    ///
    /// # Errors
    ///
    /// As `get_agent_task` and `task_attempts`, or the renewal's.
    pub fn task_with_attempts(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        task: &str,
    ) -> Result<(AgentTask, Vec<TaskAttempt>)> {
        let t = self.task(caller, acting, task)?;
        let attempts = self.0.store.task_attempts(caller, acting, task)?;
        Ok((t, attempts))
    }

    /// The tasks `acting` can see matching `query`, a page of at most `limit`.
    ///
    /// # Errors
    ///
    /// As `list_agent_tasks`, or the renewal's.
    pub fn tasks(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        query: &TaskQuery,
        limit: usize,
    ) -> Result<Page<AgentTask>> {
        self.renew(caller, acting)?;
        let tasks = self.0.store.list_agent_tasks(caller, acting, query, limit)?;
        Ok(Page::of(tasks, limit, |t| t.id.clone()))
    }

    /// Cancels a task.
    ///
    /// # Errors
    ///
    /// As `cancel_agent_task`, or the renewal's.
    pub fn cancel_task(&mut self, caller: &Caller, acting: &Acting, task: &str) -> Result<Mutation<AgentTask>> {
        self.renew(caller, acting)?;
        let m = self.0.store.cancel_agent_task(caller, acting, task)?;
        Ok(self.woke(m))
    }

    /// Completes an attempt, as its assignee (keyed by the attempt).
    ///
    /// # Errors
    ///
    /// As `complete_task_attempt`, or the renewal's.
    pub fn complete_attempt(
        &mut self,
        caller: &Caller,
        agent: &AgentActor,
        done: &TaskCompletion,
    ) -> Result<Mutation<AgentTask>> {
        let m = self.0.store.complete_task_attempt(caller, agent, done)?;
        self.keyed(caller, &Acting::Agent(agent.clone()), m)
    }

    /// Registers a wait, as the waiting agent (keyed).
    ///
    /// # Errors
    ///
    /// As `register_agent_wait`, or the renewal's.
    pub fn register_wait(
        &mut self,
        caller: &Caller,
        agent: &AgentActor,
        new: &NewWait,
        key: &str,
    ) -> Result<Mutation<AgentWait>> {
        let m = self.0.store.register_agent_wait(caller, agent, new, key)?;
        self.keyed(caller, &Acting::Agent(agent.clone()), m)
    }

    /// One wait.
    ///
    /// # Errors
    ///
    /// As `read_agent_wait`, or the renewal's.
    pub fn wait(&mut self, caller: &Caller, acting: &Acting, wait: &str) -> Result<AgentWait> {
        self.renew(caller, acting)?;
        self.0.store.read_agent_wait(caller, acting, wait)
    }

    /// Cancels a wait.
    ///
    /// # Errors
    ///
    /// As `cancel_agent_wait`, or the renewal's.
    pub fn cancel_wait(&mut self, caller: &Caller, acting: &Acting, wait: &str) -> Result<Mutation<AgentWait>> {
        self.renew(caller, acting)?;
        let m = self.0.store.cancel_agent_wait(caller, acting, wait)?;
        Ok(self.woke(m))
    }

    /// Creates a goal (keyed).
    ///
    /// # Errors
    ///
    /// As `create_goal`, or the renewal's.
    pub fn create_goal(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        new: &NewGoal,
        key: &str,
    ) -> Result<Mutation<Goal>> {
        let m = self.0.store.create_goal(caller, acting, new, key)?;
        self.keyed(caller, acting, m)
    }

    /// One goal.
    ///
    /// # Errors
    ///
    /// As `get_goal`, or the renewal's.
    pub fn goal(&mut self, caller: &Caller, acting: &Acting, goal: &str) -> Result<Goal> {
        self.renew(caller, acting)?;
        self.0.store.get_goal(caller, acting, goal)
    }

    /// The Goal Plan card's observation of `goal`, as the owner, under the host's `quiet`
    /// period: the goal, and the stalled attention it may record; schedules the controller it
    /// woke.
    ///
    /// # Errors
    ///
    /// As `observe_goal_plan`.
    pub fn observe_goal_plan(
        &mut self,
        caller: &Caller,
        goal: &str,
        quiet: std::time::Duration,
    ) -> Result<GoalPlanObservation> {
        let m = self.0.store.observe_goal_plan(caller, &Acting::Human, goal, quiet)?;
        Ok(self.woke(m).value)
    }

    /// Checkpoints a goal's plan (keyed).
    ///
    /// # Errors
    ///
    /// As `checkpoint_goal`, or the renewal's.
    pub fn checkpoint_goal(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        checkpoint: &GoalCheckpoint,
        key: &str,
    ) -> Result<Mutation<Goal>> {
        let m = self.0.store.checkpoint_goal(caller, acting, checkpoint, key)?;
        self.keyed(caller, acting, m)
    }

    /// Completes a goal.
    ///
    /// # Errors
    ///
    /// As `complete_goal`, or the renewal's.
    pub fn complete_goal(&mut self, caller: &Caller, acting: &Acting, goal: &str) -> Result<Mutation<Goal>> {
        self.renew(caller, acting)?;
        let m = self.0.store.complete_goal(caller, acting, goal)?;
        Ok(self.woke(m))
    }

    /// One attention event.
    ///
    /// # Errors
    ///
    /// As `get_attention_event`, or the renewal's.
    pub fn attention_event(&mut self, caller: &Caller, acting: &Acting, event: &str) -> Result<AttentionEvent> {
        self.renew(caller, acting)?;
        self.0.store.get_attention_event(caller, acting, event)
    }
}

#[cfg(test)]
mod tests {
    use ahp_store::conversation::{AgentCard, OPERATOR_SUBJECT};

    use super::*;
    use crate::carrier::Recorded;

    #[test]
    fn a_write_schedules_exactly_whom_the_store_woke_and_a_replay_or_a_refusal_nobody() {
        let mut store = Store::open_in_memory().unwrap();
        let op = Caller::full(OPERATOR_SUBJECT).unwrap();
        let card = AgentCard {
            handle: "worker".into(),
            display_name: "Worker".into(),
            description: String::new(),
            specialties: Vec::new(),
        };
        let worker = store.create_agent(&op, &card, "a-1").unwrap().value;
        // An assignee takes work only through a live, wake-capable endpoint.
        let ep = store
            .attach_endpoint(&op, &worker.id, std::time::Duration::from_secs(60), "e-1")
            .unwrap()
            .value;
        store.register_wake_carrier(&worker.id, &ep.id, ep.generation).unwrap();
        let carriers = Recorded::default();
        let mut ops = Delegation::new(&mut store, &carriers);
        let new = NewTask {
            assignee: worker.id.clone(),
            title: "t".into(),
            instructions: "i".into(),
            goal: None,
            start: true,
        };
        let created = ops.create_task(&op, &Acting::Human, &new, "t-1").unwrap();
        assert!(created.state_changed);
        ops.create_task(&op, &Acting::Human, &new, "t-1").unwrap();
        let mut missing = new.clone();
        missing.assignee = "agt_missing".into();
        ops.create_task(&op, &Acting::Human, &missing, "t-2").unwrap_err();
        let unstarted = NewTask { start: false, ..new };
        ops.create_task(&op, &Acting::Human, &unstarted, "t-3").unwrap();
        assert_eq!(
            *carriers.0.lock().unwrap(),
            vec![vec![worker.id], vec![], vec![]],
            "the started task scheduled its assignee, its replay and the unstarted task nobody; the refusal scheduled nothing"
        );
    }
}
