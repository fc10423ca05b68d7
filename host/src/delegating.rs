//! Whom a delegation write may have woken, scheduled at once: every surface that writes the
//! delegation domain — an agent's `delegation` calls inside a turn, the MCP tools
//! (`create_agent_task`, `complete_agent_task_attempt`, `register_agent_wait`, …) — calls
//! [`schedule_around`] after a write that changed state, so the woken agents run now rather
//! than on the controller's next tick.
//!
//! The store's delegation writes do not report the wakes they created (their result is the
//! resource), so this schedules a superset read from the resource itself. It is exact enough:
//! a wake a delegation write creates is always for one of a task's parties — its assignee (an
//! attempt's wake), its creator or its goal's controller (an attention event's wake), or an
//! agent waiting on it, and only those three can see the task to wait on it. Scheduling an
//! agent with no open wake costs one look at its wakes; scheduling nobody is never wrong
//! either (the tick finds every wake), only slower.
//!
//! Like [`crate::posting::post`], this takes the already-locked store, so it runs where the
//! lock is held: a blocking thread, never a tokio worker.

use ahp_store::Store;
use ahp_store::delegation::AgentTask;

use crate::carrier::Carriers;

/// Schedules the parties of `task` (its assignee, its creator, its goal's controller) that
/// this process carries.
pub fn schedule_around(store: &Store, carriers: &dyn Carriers, task: &AgentTask) {
    carriers.schedule_woken(&parties(store, task));
}

/// The agents a write about `task` may have woken.
pub fn parties(store: &Store, task: &AgentTask) -> Vec<String> {
    let mut agents = vec![task.assignee_agent_id.clone()];
    agents.extend(task.creator_agent_id.clone());
    // The goal is the task's owner's; the operator read skips the caller's visibility, which
    // the write that produced `task` already checked. A goal that cannot be read only means
    // its controller waits for the tick.
    if let Some(goal) = task.goal_id.as_deref()
        && let Ok(goal) = store.operator_goal(goal)
    {
        agents.extend(goal.controller_agent_id);
    }
    agents.sort();
    agents.dedup();
    agents
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ahp_store::conversation::{AgentActor, AgentCard, Caller, OPERATOR_SUBJECT};
    use ahp_store::delegation::{Acting, NewGoal, NewTask};

    use super::*;

    #[test]
    fn the_parties_are_assignee_creator_and_goal_controller_once_each() {
        let mut store = Store::open_in_memory().unwrap();
        let op = Caller::full(OPERATOR_SUBJECT).unwrap();
        let card = |h: &str| AgentCard {
            handle: h.into(),
            display_name: h.into(),
            description: String::new(),
            specialties: Vec::new(),
        };
        let boss = store.create_agent(&op, &card("boss"), "a-1").unwrap().value;
        let worker = store.create_agent(&op, &card("worker"), "a-2").unwrap().value;
        let lead = store.create_agent(&op, &card("lead"), "a-3").unwrap().value;
        let boss_ep = AgentActor::of(
            &store
                .attach_endpoint(&op, &boss.id, Duration::from_secs(60), "e-1")
                .unwrap()
                .value,
        );
        let goal = NewGoal {
            title: "g".into(),
            completion_intent: "done".into(),
            plan: Vec::new(),
            controller: Some(lead.id.clone()),
        };
        let goal = store.create_goal(&op, &Acting::Human, &goal, "g-1").unwrap().value;
        let new = |goal: Option<String>| NewTask {
            assignee: worker.id.clone(),
            title: "t".into(),
            instructions: "i".into(),
            goal,
            start: false,
        };
        let by_human = store
            .create_agent_task(&op, &Acting::Human, &new(Some(goal.id.clone())), "t-1")
            .unwrap()
            .value;
        let mut expected = vec![worker.id.clone(), lead.id.clone()];
        expected.sort();
        assert_eq!(parties(&store, &by_human), expected);
        let by_boss = store
            .create_agent_task(&op, &Acting::Agent(boss_ep), &new(None), "t-2")
            .unwrap()
            .value;
        let mut expected = vec![worker.id.clone(), boss.id.clone()];
        expected.sort();
        assert_eq!(parties(&store, &by_boss), expected);
    }
}
