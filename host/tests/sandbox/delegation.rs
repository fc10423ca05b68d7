//! The worker and coordinator guests delegating through `ahp:agent/delegation`.

#[allow(unused_imports)]
use super::*;

#[test]
pub(super) fn worker() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({"job": "reverse"})), Tier::Nano, 1_000_000, "worker");
    assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
    let (agent, cv, caller) = conversation_with(&h, &id);

    worker::reverses_its_tasks(&h.host, &caller, &agent, &cv);

    // A tool state it cannot follow fails the activation, with the reason.
    let bad = h.pushed(
        &snapshot(0, json!({"delayMs": 120_001})),
        Tier::Nano,
        1_000_000,
        "worker",
    );
    let report = h.activate(&bad);
    assert!(
        matches!(&report.outcome, RunOutcome::GuestError(e) if e.contains("delayMs 120001 is over 120000")),
        "{:?}",
        report.outcome
    );
    let edge = h.pushed(
        &snapshot(0, json!({"delayMs": 120_000})),
        Tier::Nano,
        1_000_000,
        "worker",
    );
    assert_eq!(
        h.activate(&edge).outcome,
        RunOutcome::Returned,
        "the bound itself is allowed"
    );
}

#[test]
pub(super) fn coordinator() {
    use ahp_host::store::delegation::{Acting, TaskState};
    let h = host();
    let agents = h.host.agents();
    let mut workers = Vec::new();
    for job in ["count", "reverse"] {
        let id = h.pushed(&snapshot(0, json!({"job": job})), Tier::Nano, 1_000_000, "worker");
        assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
        workers.push(h.db().transfer(&id).unwrap().agent_id.unwrap());
    }
    let state = json!({"workers": workers, "waitMode": "all"});
    let id = h.pushed(&snapshot(0, state), Tier::Nano, 1_000_000, "coordinator");
    assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
    let (agent, cv, caller) = conversation_with(&h, &id);

    // The question: one task per worker, one wait, no answer yet.
    let question = post(&h.host, &caller, &cv, "ship A-1 first", "q-1");
    assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
    let listed = h
        .db()
        .list_agent_tasks(&caller, &Acting::Human, &Default::default(), 10)
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        listed
            .iter()
            .all(|t| t.instructions == "ship A-1 first" && t.creator_agent_id.as_deref() == Some(agent.as_str()))
    );
    assert_eq!(transcript(&h.host, &caller, &cv).len(), 1);

    // The first worker's result alone fires nothing (all); the second's fires the wait.
    agents.drive(&workers[0]).unwrap();
    assert_eq!(
        agents.drive(&agent).unwrap(),
        Default::default(),
        "a partial all makes no wake"
    );
    agents.drive(&workers[1]).unwrap();
    assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
    let t = transcript(&h.host, &caller, &cv);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].reply_to.as_deref(), Some(question.as_str()));
    assert_eq!(
        t[1].body,
        format!(
            "On \"ship A-1 first\":\n- {} (succeeded): count: 3 words, 10 letters\n- {} (succeeded): reverse: first A-1 ship",
            workers[0], workers[1]
        )
    );
    assert!(
        listed
            .iter()
            .all(|t| task(&h.host, &caller, &t.id).state == TaskState::Succeeded)
    );
    // Nothing is left to do: no second answer.
    assert_eq!(agents.drive(&agent).unwrap(), Default::default());

    // A tool state it cannot follow fails the activation: 9 workers, or one twice.
    let nine: Vec<String> = (0..9).map(|i| format!("agt_{i:026}")).collect();
    for (workers, why) in [
        (json!(nine), "9 workers, at most 8"),
        (json!([workers[0], workers[0]]), "a worker is listed twice"),
    ] {
        let bad = h.pushed(
            &snapshot(0, json!({"workers": workers})),
            Tier::Nano,
            1_000_000,
            "coordinator",
        );
        let report = h.activate(&bad);
        assert!(
            matches!(&report.outcome, RunOutcome::GuestError(e) if e.contains(why)),
            "{:?}",
            report.outcome
        );
    }

    // Without workers, a question gets an answer saying so.
    let lone = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "coordinator");
    assert_eq!(h.activate(&lone).outcome, RunOutcome::Returned);
    let (lone_agent, lone_cv, _) = conversation_with(&h, &lone);
    post(&h.host, &caller, &lone_cv, "anyone?", "q-2");
    agents.drive(&lone_agent).unwrap();
    let t = transcript(&h.host, &caller, &lone_cv);
    assert_eq!(t[1].body, "I have no workers to ask (toolState.workers is empty).");
}
