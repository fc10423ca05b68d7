//! Upgrading a database of the schema before delegation (migration 0008): its wakes and wake
//! attempts survive the rebuild of `wakes`, as message-origin wakes, with their foreign keys.

use rusqlite::Connection;

use super::*;

#[test]
fn a_schema_8_database_keeps_its_wakes_and_attempts_as_message_wakes() {
    if crate::testing::skip_on_postgres("upgrades a SQLite fixture file of an older schema") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eight.db");
    let alice = Caller::full("account:alice").unwrap();
    let (agent, endpoint) = ("agt_000000000000000000000001", "ep_000000000000000000000001");
    let (fenced, open) = ("wk_000000000000000000000001", "wk_000000000000000000000002");
    {
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        for sql in [
            include_str!("../../../../sql/0001_transfers.sql"),
            include_str!("../../../../sql/0002_conversation.sql"),
            include_str!("../../../../sql/0003_principals.sql"),
            include_str!("../../../../sql/0004_sandbox.sql"),
            include_str!("../../../../sql/0005_conversation_audit.sql"),
            include_str!("../../../../sql/0006_transfer_agents.sql"),
            include_str!("../../../../sql/0007_host_held_endpoints.sql"),
            include_str!("../../../../sql/0008_usage_events_by_kind.sql"),
        ] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 8).unwrap();
        conn.execute(
            "INSERT INTO agents (id, owner_principal, handle, display_name, description, specialties,
                                 profile_revision, controller_generation, created_at, updated_at)
             VALUES (?1, ?2, 'h', 'H', '', '[]', 1, 1, 1, 1)",
            (agent, alice.principal().as_str()),
        )
        .unwrap();
        conn.execute(
            "INSERT INTO agent_endpoints (id, agent_id, principal, generation, state, lease_expires_at, wake_capable,
                                          attached_at, updated_at, lease_micros)
             VALUES (?1, ?2, ?3, 1, 'attached', 9000000000000000, 1, 1, 1, 600000000)",
            (endpoint, agent, alice.principal().as_str()),
        )
        .unwrap();
        conn.execute(
            "INSERT INTO wakes (id, agent_id, state, delivery_count, first_delivery_order, high_water_order, created_at, updated_at, dispatched_at)
             VALUES (?1, ?3, 'dispatched', 2, 1, 2, 1, 1, 1), (?2, ?3, 'pending', 1, 3, 3, 2, 2, NULL)",
            (fenced, open, agent),
        )
        .unwrap();
        conn.execute(
            "INSERT INTO wake_attempts (id, wake_id, agent_id, endpoint_id, generation, state, claim_expires_at,
                                        consume_token_hash, claimed_at, dispatched_at, kind)
             VALUES ('wka_000000000000000000000001', ?1, ?2, ?3, 1, 'dispatched', 5, 'h', 1, 1, 'host')",
            (fenced, agent, endpoint),
        )
        .unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), Store::supported_schema_version());
    let fk: i64 = store
        .autocommit()
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 0);
    let actor = AgentActor {
        agent: agent.into(),
        endpoint: endpoint.into(),
        generation: 1,
    };
    let wakes = store.list_wakes(&alice, &actor, 10).unwrap();
    assert_eq!(wakes.len(), 2);
    assert!(wakes.iter().all(|w| w.origin == WakeOrigin::Message));
    let old = wakes.iter().find(|w| w.id == fenced).unwrap();
    assert_eq!(
        (old.state, old.delivery_count, old.high_water_order),
        (WakeState::Dispatched, 2, 2)
    );
    let attempts = store.wake_attempts(&alice, &actor, fenced, 10).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].state, AttemptState::Dispatched);
    // The one-open-wake index survived: a task attempt coalesces into the pending wake.
    let new = NewTask {
        assignee: agent.into(),
        title: "t".into(),
        instructions: "i".into(),
        goal: None,
        start: true,
    };
    let task = store
        .create_agent_task(&alice, &Acting::Human, &new, "t")
        .unwrap()
        .value;
    assert_eq!(task.current_attempt.unwrap().wake_id, open);
    // An upgraded takeover settles the old dispatched attempt as before.
    let report = store.reconcile_takeover().unwrap();
    assert_eq!(report.marked_unknown, 1);
}
