//! `carried_agent` and `carried_with_wakes`: what a host reads of the agents it carries
//! instead of holding them — only this host's, only a live wake-capable endpoint of an active
//! transfer, and, for the tick, only the agents with a wake before the fence.

use std::time::Duration;

use super::tests::{CLAIM, LEASE, fixture};
use crate::conversation::{Acting, AgentActor, Caller, DispatchOutcome, IdempotencyKey, NewConversation, NewMessage};
use crate::*;

fn operator() -> Caller {
    TransferOwner::Operator.caller().unwrap()
}

/// The host acting for the operator (whose transfers these are).
fn host() -> Caller {
    TransferOwner::Operator.host_caller().unwrap()
}

/// One human post to a conversation with `agents`: a pending wake for each.
fn post(f: &mut super::tests::Fixture, agents: &[&str], key: &str) {
    let op = operator();
    let cv = f
        .store
        .create_conversation(
            &op,
            &NewConversation {
                title: "q".into(),
                agents: agents.iter().map(|a| (*a).to_owned()).collect(),
            },
            key,
        )
        .unwrap()
        .value;
    let post = NewMessage {
        conversation: cv.id,
        acting: Acting::Human,
        body: "hello".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(key.into()),
    };
    f.store.post_message(&op, &post).unwrap();
}

#[test]
fn a_carried_agent_is_read_from_its_rows_only_while_this_host_carries_it() {
    let mut f = fixture();
    let (t, b) = f.carried();
    let c = f.store.carried_agent(&b.agent.id).unwrap().expect("carried here");
    assert_eq!(c.transfer.id, t);
    assert_eq!(c.transfer.status, TransferStatus::Active);
    assert_eq!(
        (c.endpoint.id.as_str(), c.endpoint.generation),
        (b.endpoint.id.as_str(), 1)
    );
    assert!(c.endpoint.wake_capable && c.endpoint.host_held);

    // Bound but never registered as a carrier: not carried.
    let (_, unregistered) = {
        let t = f.active(&TransferOwner::Operator);
        let b = f.store.bind_transfer_agent(&t, LEASE).unwrap();
        (t, b)
    };
    assert_eq!(f.store.carried_agent(&unregistered.agent.id).unwrap(), None);
    // Another host's: not carried here.
    let (_, elsewhere) = f.carried();
    f.store
        .autocommit()
        .execute(
            "UPDATE agent_endpoints SET host_id = 'elsewhere' WHERE id = ?1",
            [&elsewhere.endpoint.id],
        )
        .unwrap();
    assert_eq!(f.store.carried_agent(&elsewhere.agent.id).unwrap(), None);
    // Its lease ran out (nobody renewed it): not carried.
    f.clock.advance(LEASE + Duration::from_secs(1));
    assert_eq!(f.store.carried_agent(&b.agent.id).unwrap(), None);
    // Unknown and malformed agents.
    assert_eq!(f.store.carried_agent("agt_000000000000000000000000").unwrap(), None);
    assert!(matches!(
        f.store.carried_agent("ep_nope"),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn an_ended_or_insolvent_transfer_s_agent_is_not_carried() {
    let mut f = fixture();
    let (insolvent, poor) = f.carried();
    f.store.report_usage(&insolvent, 1_000, "compute").unwrap();
    assert_eq!(f.store.carried_agent(&poor.agent.id).unwrap(), None);
    let (ended, gone) = f.carried();
    f.store.terminate(&ended, "done").unwrap();
    assert_eq!(f.store.carried_agent(&gone.agent.id).unwrap(), None);
}

#[test]
fn carried_with_wakes_lists_this_host_s_agents_with_work_before_the_fence_paged() {
    let mut f = fixture();
    let mut carried = Vec::new();
    for _ in 0..5 {
        carried.push(f.carried().1);
    }
    let (_, quiet) = f.carried();
    let (_, elsewhere) = f.carried();
    let ids: Vec<&str> = carried
        .iter()
        .chain([&elsewhere])
        .map(|b| b.agent.id.as_str())
        .collect();
    post(&mut f, &ids, "p");
    f.store
        .autocommit()
        .execute(
            "UPDATE agent_endpoints SET host_id = 'elsewhere' WHERE id = ?1",
            [&elsewhere.endpoint.id],
        )
        .unwrap();
    let actor = |b: &AgentBinding| AgentActor::of(&b.endpoint);
    // One claimed (still before the fence), one past it and accepted, one not wake-capable.
    f.store
        .claim_wake(&host(), &actor(&carried[1]), CLAIM)
        .unwrap()
        .unwrap();
    let ticket = f
        .store
        .claim_and_dispatch(&host(), &actor(&carried[2]), CLAIM)
        .unwrap()
        .unwrap();
    f.store
        .finish_turn(&host(), &actor(&carried[2]), &ticket, DispatchOutcome::Accepted)
        .unwrap();
    f.store
        .autocommit()
        .execute(
            "UPDATE agent_endpoints SET wake_capable = 0 WHERE id = ?1",
            [&carried[3].endpoint.id],
        )
        .unwrap();
    let mut want: Vec<AgentActor> = [&carried[0], &carried[1], &carried[4]].into_iter().map(actor).collect();
    want.sort_by(|a, b| a.agent.cmp(&b.agent));
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = f.store.carried_with_wakes(after.as_deref(), 2).unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(last.agent.clone());
        seen.extend(page);
    }
    assert_eq!(seen, want);
    assert!(!seen.contains(&actor(&quiet)) && !seen.contains(&actor(&elsewhere)));
    for limit in [0, crate::conversation::carrier::MAX_READY_PAGE + 1] {
        assert!(matches!(
            f.store.carried_with_wakes(None, limit),
            Err(Error::InvalidInput { .. })
        ));
    }
    assert!(matches!(
        f.store.carried_with_wakes(Some("ep_x"), 2),
        Err(Error::InvalidInput { .. })
    ));
    // The largest page is accepted.
    let all = f
        .store
        .carried_with_wakes(None, crate::conversation::carrier::MAX_READY_PAGE)
        .unwrap();
    assert_eq!(all, want);
}
