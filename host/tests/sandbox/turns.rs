//! Conversation turns of the probing guests: replies, their bounds, insolvency, the older contract
//! versions, aliased arguments, tools.

#[allow(unused_imports)]
use super::*;

/// The owner's conversation with the agent of `transfer` (an operator-created transfer: the
/// operator owns its agent), and the caller that owns it.
pub(super) fn conversation_with(h: &Host, transfer: &str) -> (String, String, ahp_host::store::conversation::Caller) {
    use ahp_host::store::conversation::{Caller, NewConversation, OPERATOR_SUBJECT};
    let caller = Caller::full(OPERATOR_SUBJECT).unwrap();
    let agent = h
        .db()
        .transfer(transfer)
        .unwrap()
        .agent_id
        .expect("bound at activation");
    let cv = h
        .db()
        .create_conversation(
            &caller,
            &NewConversation {
                title: "questions".into(),
                agents: vec![agent.clone()],
            },
            &format!("cv-{transfer}"),
        )
        .unwrap()
        .value;
    (agent, cv.id, caller)
}

pub(super) fn spent(h: &Host, transfer: &str) -> u64 {
    h.db().budget(transfer).unwrap().unwrap().spent_micro_usd
}

#[test]
pub(super) fn turn_prober() {
    use ahp_host::store::conversation::Author;
    let h = host();
    let agents = h.host.agents();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turn-prober");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned);
    let agent = report.transfer.agent_id.clone().expect("activate returns the agentId");
    let carrier = agents.carrier(&agent).expect("this host carries the agent");
    let endpoint = h
        .host
        .store()
        .locked()
        .get_endpoint(&carrier.caller, &agent, &carrier.actor.endpoint)
        .unwrap();
    assert!(ahp_host::carrier::Carriers::holds(agents.as_ref(), &endpoint));
    let (_, cv, caller) = conversation_with(&h, &id);

    // A reply, authored by the agent, answering the message; the turn's fuel is charged.
    let before = spent(&h, &id);
    let question = post(&h.host, &caller, &cv, "echo hello", "p1");
    let drive = agents.drive(&agent).unwrap();
    assert_eq!(drive.consumed, 1, "{drive:?}");
    assert!(drive.fuel_consumed > 0);
    let t = transcript(&h.host, &caller, &cv);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].body, "echo: echo hello");
    assert_eq!(t[1].reply_to.as_deref(), Some(question.as_str()));
    assert!(matches!(&t[1].author, Author::Agent { agent_id, .. } if *agent_id == agent));
    let compute = Tier::Nano.limits().compute_cost_micro_usd(drive.fuel_consumed);
    assert!(spent(&h, &id) + 1 >= before + compute, "the turn's compute is charged");
    // Nothing pending: another opportunity runs no turn.
    assert_eq!(agents.drive(&agent).unwrap(), Default::default());

    // A burst of 50 posts: one wake, a bounded number of turns, every message answered once.
    for i in 0..50 {
        post(&h.host, &caller, &cv, &format!("echo {i}"), &format!("burst-{i}"));
    }
    let drive = agents.drive(&agent).unwrap();
    assert_eq!(drive.consumed, 1, "the burst coalesced into one wake: {drive:?}");
    let t = transcript(&h.host, &caller, &cv);
    let replies: Vec<_> = t.iter().filter(|m| m.body.starts_with("echo: echo ")).collect();
    assert_eq!(replies.len(), 51);
    let mut answered: Vec<_> = replies.iter().filter_map(|m| m.reply_to.clone()).collect();
    answered.sort();
    answered.dedup();
    assert_eq!(answered.len(), 51, "each message answered exactly once");

    // The prober acts on its first queued message, which a failed turn leaves queued: consume
    // it as the agent, so the next mode is read.
    let handled = |msg: &str| {
        h.db().consume_delivery(&carrier.caller, &carrier.actor, msg).unwrap();
    };
    // Flooding replies stops at the per-wake bound.
    let flood = post(&h.host, &caller, &cv, "flood", "flood");
    let drive = agents.drive(&agent).unwrap();
    assert_eq!(drive.unknown, 1, "flood returns an error: {drive:?}");
    let floods = transcript(&h.host, &caller, &cv)
        .iter()
        .filter(|m| m.body.starts_with("flood "))
        .count();
    assert_eq!(floods, 64, "a wake's replies stop at its bound");
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Active);
    handled(&flood);

    // A turn that fails keeps its sandbox and transfer; the wake is delivery_unknown.
    let fail = post(&h.host, &caller, &cv, "fail", "fail");
    let drive = agents.drive(&agent).unwrap();
    assert_eq!(drive.unknown, 1);
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Active);
    assert_eq!(h.sandboxes.live_count(), 1, "the sandbox lives on");
    handled(&fail);

    // A turn that spins is stopped by a ceiling, and its transfer ends with its sandbox.
    post(&h.host, &caller, &cv, "spin", "spin");
    let started = std::time::Instant::now();
    let drive = agents.drive(&agent).unwrap();
    assert!(
        started.elapsed() <= wall_clock_bound(Tier::Nano),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(drive.unknown, 1);
    let t = h.db().transfer(&id).unwrap();
    assert_eq!(t.status, TransferStatus::Terminated);
    assert!(agents.carrier(&agent).is_none(), "the carrier is released");
    assert_eq!(h.sandboxes.live_count(), 0);
    assert!(!h.events(&id, EventKind::CeilingExceeded).is_empty());
}

#[test]
pub(super) fn a_reply_past_the_body_bound_is_refused() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turn-prober");
    let agent = h.activate(&id).transfer.agent_id.unwrap();
    let (_, cv, caller) = conversation_with(&h, &id);
    post(&h.host, &caller, &cv, "big", "big");
    assert_eq!(h.host.agents().drive(&agent).unwrap().unknown, 1);
    assert_eq!(transcript(&h.host, &caller, &cv).len(), 1, "nothing was posted");
}

#[test]
pub(super) fn an_insolvent_transfer_gets_no_more_turns() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turn-prober");
    let agent = h.activate(&id).transfer.agent_id.unwrap();
    let (_, cv, caller) = conversation_with(&h, &id);
    let left = 1_000_000 - spent(&h, &id);
    h.db().report_usage(&id, left, "model_tokens").unwrap();
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Insolvent);
    post(&h.host, &caller, &cv, "echo late", "late");
    assert_eq!(h.host.agents().drive(&agent).unwrap(), Default::default());
    assert_eq!(
        transcript(&h.host, &caller, &cv).len(),
        1,
        "no reply from an insolvent agent"
    );
    assert!(h.host.agents().carrier(&agent).is_none());
}

#[test]
pub(super) fn assistant() {
    // With no model in the host's policy the assistant cannot think: its model call fails with
    // the gateway's `unknown-model`, its answering loop leaves the message queued for one more
    // try (counted), and the turn ends well.
    let h = host();
    let id = h.pushed(&snapshot(2, json!({})), Tier::Nano, 1_000_000, "assistant");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned);
    let agent = report.transfer.agent_id.expect("bound at activation");
    let (_, cv, caller) = conversation_with(&h, &id);
    post(&h.host, &caller, &cv, "what is in stock?", "assistant-1");
    let drive = h.host.agents().drive(&agent).unwrap();
    assert_eq!((drive.consumed, drive.unknown), (1, 0), "{drive:?}");
    assert_eq!(transcript(&h.host, &caller, &cv).len(), 1, "no answer without a model");
    let waiting = h.db().queued_deliveries(&caller, &agent, 0, 10).unwrap();
    assert_eq!(waiting.iter().map(|d| d.tries).collect::<Vec<_>>(), [1], "tried once");
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Active);
}

#[test]
pub(super) fn turns_v0_2() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turns-v0-2");
    let report = h.activate(&id);
    assert_eq!(
        report.outcome,
        RunOutcome::Returned,
        "a 0.2.0 component still activates"
    );
    let agent = report.transfer.agent_id.expect("bound at activation");
    let (_, cv, caller) = conversation_with(&h, &id);
    for (i, body) in ["hello old friend", "and again"].into_iter().enumerate() {
        post(&h.host, &caller, &cv, body, &format!("v02-{i}"));
        assert_eq!(h.host.agents().drive(&agent).unwrap().consumed, 1, "and takes turns");
        let t = transcript(&h.host, &caller, &cv);
        assert_eq!(t.last().unwrap().body, format!("0.2.0 heard: {body}"));
    }
}

#[test]
pub(super) fn legacy_agent() {
    let h = host();
    let id = h.pushed(&snapshot(3, json!({})), Tier::Nano, 1_000_000, "legacy-agent");
    let report = h.activate(&id);
    assert_eq!(
        report.outcome,
        RunOutcome::Returned,
        "a 0.1.0 component still activates"
    );
    assert_eq!(report.transfer.status, TransferStatus::Active);
    assert!(
        h.sandboxes
            .guest_log(&id)
            .unwrap()
            .contains("legacy agent resumed after 3 messages")
    );
    let agent = report.transfer.agent_id.expect("bound like any other");
    assert!(
        h.host.agents().carrier(&agent).is_none(),
        "but no carrier: it takes no turns"
    );
    assert!(h.db().load_checkpoint(&id).unwrap().is_some());
}

/// `aliasing-caller` is tested with 16 MiB strings, and the host's memory measured, in
/// `turns.rs` (`aliasing::*`); here, small aliased lists one past their bounds: nine wait
/// sources, and two copies of 3 MB of text (6 MB, over the 4 MiB a request may hold).
#[test]
pub(super) fn aliasing_caller() {
    let h = host();
    let agents = h.host.agents();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "aliasing-caller");
    assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
    let (agent, cv, caller) = conversation_with(&h, &id);
    for (i, (body, want)) in [
        (
            "alias register-wait 9 100",
            "register-wait x9: refused Invalid(\"sources: must name 1 to 8 tasks\")",
        ),
        (
            "alias estimate 2 3000000",
            "estimate x2: refused TooLarge(\"over 4194304 bytes of text in all\")",
        ),
        ("hello", "echo: hello"),
    ]
    .into_iter()
    .enumerate()
    {
        post(&h.host, &caller, &cv, body, &format!("ac{i}"));
        assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
        let t = transcript(&h.host, &caller, &cv);
        assert_eq!(t.last().unwrap().body, want);
    }
}

/// `tool-prober` is tested against real MCP servers in `mcp_tools.rs`; here, under this file's
/// policy (which allows only `https://inventory.example.com`, unreachable from here), a server
/// that fails is left out of the list and a call names no tool.
#[test]
pub(super) fn tool_prober() {
    let h = host();
    let agents = h.host.agents();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "tool-prober");
    assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
    let (agent, cv, caller) = conversation_with(&h, &id);
    post(&h.host, &caller, &cv, "call inventory {}", "tp1");
    assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
    let t = transcript(&h.host, &caller, &cv);
    assert!(t[1].body.starts_with("error unknown-tool: "), "{}", t[1].body);
}
