//! An agent's console page on a real `ahp serve --http`: its tasks (assigned and created), waits
//! and goals with their provenance, every value escaped, the live region following a task to its
//! result, and another key's agent answered exactly like a missing one.

use std::path::Path;
use std::time::Duration;

use ahp_host::mcp::identity::api_key_caller;
use ahp_store::Store;
use ahp_store::conversation::{AgentActor, AgentCard, Caller, Endpoint};
use ahp_store::delegation::{
    Acting, NewGoal, NewTask, NewWait, PlanStep, StepStatus, TaskCompletion, TaskOutcome, WaitMode,
};

use crate::console::{base, get, sign_in};
use crate::mcp_http::{principal, serve};

fn store(dir: &Path) -> Store {
    Store::open(dir.join("ahp.db")).unwrap()
}

fn agent(s: &mut Store, c: &Caller, handle: &str) -> (String, Endpoint) {
    let card = AgentCard {
        handle: handle.into(),
        display_name: format!("The {handle}"),
        description: String::new(),
        specialties: vec![],
    };
    let a = s.create_agent(c, &card, &format!("a-{handle}")).unwrap().value;
    let ep = s
        .attach_endpoint(c, &a.id, Duration::from_secs(600), &format!("e-{handle}"))
        .unwrap()
        .value;
    (a.id, ep)
}

#[tokio::test]
async fn an_agent_s_page_shows_its_delegation_live_with_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = principal(d, "alice", &["communication:read", "communication:manage"]);
    let other = principal(d, "bob", &["communication:read", "communication:manage"]);
    let mut s = store(d);
    let alice = api_key_caller(&s.authenticate(&key).unwrap().unwrap());
    let bob = api_key_caller(&s.authenticate(&other).unwrap().unwrap());
    let (boss, boss_ep) = agent(&mut s, &alice, "boss");
    let (worker, worker_ep) = agent(&mut s, &alice, "worker");
    let (theirs, _) = agent(&mut s, &bob, "theirs");
    let goal = NewGoal {
        title: "<b>Q3</b>".into(),
        completion_intent: "a number".into(),
        plan: vec![PlanStep {
            title: "ask <them>".into(),
            status: StepStatus::InProgress,
        }],
        controller: Some(boss.clone()),
    };
    let goal = s.create_goal(&alice, &Acting::Human, &goal, "g").unwrap().value;
    let new = NewTask {
        assignee: worker.clone(),
        title: "<script>alert(1)</script>".into(),
        instructions: "sum".into(),
        goal: Some(goal.id.clone()),
        start: true,
    };
    let boss_acts = AgentActor::of(&boss_ep);
    let task = s
        .create_agent_task(&alice, &Acting::Agent(boss_acts.clone()), &new, "t")
        .unwrap()
        .value;
    let attempt = task.current_attempt.clone().unwrap();
    let wait = NewWait {
        sources: vec![task.id.clone()],
        mode: WaitMode::All,
        goal: None,
    };
    let wait = s.register_agent_wait(&alice, &boss_acts, &wait, "w").unwrap().value;
    drop(s);

    let server = serve(d, &[]);
    let base = base(&server);
    let cookie = sign_in(&base, &key).await;
    // The agents page links each agent to its own page.
    let agents = get(&format!("{base}/console/agents"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(agents.contains(&format!("href=\"/console/agents/{boss}\"")), "{agents}");

    // The boss's page: the task it created (with the worker, goal, attempt, generation and
    // wake), its waiting wait, the goal it controls; every value escaped.
    let r = get(&format!("{base}/console/agents/{boss}"), Some(&cookie)).await;
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    for shown in [
        "Tasks it created",
        task.id.as_str(),
        worker.as_str(),
        goal.id.as_str(),
        attempt.id.as_str(),
        attempt.wake_id.as_str(),
        "generation 1",
        wait.id.as_str(),
        "not fired",
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "&lt;b&gt;Q3&lt;/b&gt;",
        "ask &lt;them&gt; (in_progress)",
        &format!("data-live=\"/console/agents/{boss}/live\""),
    ] {
        assert!(page.contains(shown), "{shown} missing from {page}");
    }
    assert!(!page.contains("<script>alert(1)") && !page.contains("<b>Q3"), "{page}");
    // The worker's page: the task assigned to it, created by the boss.
    let page = get(&format!("{base}/console/agents/{worker}"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    let assigned = page.split("Tasks it created").next().unwrap();
    assert!(assigned.contains(&task.id) && assigned.contains(&boss), "{page}");

    // Live: the worker finishes; the boss's region shows the result and the fired wake.
    let live = format!("{base}/console/agents/{boss}/live");
    let before = get(&live, Some(&cookie)).await;
    assert_eq!(before.status(), 200);
    let version = before.headers()["x-live-version"].to_str().unwrap().to_owned();
    let done = TaskCompletion {
        attempt: attempt.id.clone(),
        outcome: TaskOutcome::Succeeded,
        result: "55 <units>".into(),
    };
    let mut s = store(d);
    s.complete_task_attempt(&alice, &AgentActor::of(&worker_ep), &done)
        .unwrap();
    let fired = s
        .read_agent_wait(&alice, &Acting::Human, &wait.id)
        .unwrap()
        .wake_id
        .unwrap();
    drop(s);
    let after = get(&live, Some(&cookie)).await;
    assert_ne!(after.headers()["x-live-version"].to_str().unwrap(), version);
    let region = after.text().await.unwrap();
    assert!(
        region.contains("55 &lt;units&gt;") && region.contains(&fired) && region.contains("triggered"),
        "{region}"
    );

    // Another key's agent and a missing one: the same 404, on the page and the live region.
    let missing = format!("agt_{}", "0".repeat(24));
    for suffix in ["", "/live"] {
        let foreign = get(&format!("{base}/console/agents/{theirs}{suffix}"), Some(&cookie)).await;
        let absent = get(&format!("{base}/console/agents/{missing}{suffix}"), Some(&cookie)).await;
        assert_eq!((foreign.status().as_u16(), absent.status().as_u16()), (404, 404));
        assert_eq!(foreign.text().await.unwrap(), absent.text().await.unwrap());
    }
    // A live poll without a session is a 401, not a page.
    assert_eq!(get(&live, None).await.status(), 401);
}
