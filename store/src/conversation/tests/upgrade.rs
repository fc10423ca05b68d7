//! Upgrading a database written before the conversation domain existed.

use rusqlite::Connection;

use super::*;

#[test]
fn a_schema_1_database_gains_the_conversation_tables_and_keeps_its_transfers() {
    if crate::testing::skip_on_postgres("upgrades a SQLite fixture file of an older schema") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        // The fixture: exactly what a build with only the transfers migration left behind.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../../../sql/0001_transfers.sql"))
            .unwrap();
        conn.execute(
            "INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count,
                                    tool_state, mcp_config, checksum, created_at, updated_at)
             VALUES ('tr_000000000000000000000001', 'staged', 'laptop', 'p', '[]', 0, '{}', '[]', 'c', 1, 1)",
            [],
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), Store::supported_schema_version());
    let transfers: i64 = store
        .autocommit()
        .query_row("SELECT count(*) FROM transfers", [], |r| r.get(0))
        .unwrap();
    assert_eq!(transfers, 1);
    let alice = Caller::full("account:alice").unwrap();
    let a = store.create_agent(&alice, &card("upgraded"), "k").unwrap().value;
    assert_eq!(store.get_agent(&alice, &a.id).unwrap().card.handle, "upgraded");
}

#[test]
fn a_schema_6_database_marks_exactly_the_endpoints_its_bindings_attached_as_host_held() {
    if crate::testing::skip_on_postgres("upgrades a SQLite fixture file of an older schema") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("six.db");
    let owner = CommunicationPrincipal::from_subject(OPERATOR_SUBJECT).unwrap();
    let (agent, other) = ("agt_000000000000000000000001", "agt_000000000000000000000002");
    let (bound, forged, own) = (
        "ep_000000000000000000000001",
        "ep_000000000000000000000002",
        "ep_000000000000000000000003",
    );
    let t = "tr_000000000000000000000001";
    {
        // The fixture: what a schema-6 build left behind — a transfer bound to its agent (the
        // binding's endpoint since replaced), an endpoint a client then attached to that agent
        // through `attach_agent_endpoint`, and an ordinary agent's endpoint.
        let conn = Connection::open(&path).unwrap();
        for sql in [
            include_str!("../../../sql/0001_transfers.sql"),
            include_str!("../../../sql/0002_conversation.sql"),
            include_str!("../../../sql/0003_principals.sql"),
            include_str!("../../../sql/0004_sandbox.sql"),
            include_str!("../../../sql/0005_conversation_audit.sql"),
            include_str!("../../../sql/0006_transfer_agents.sql"),
        ] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 6).unwrap();
        for (id, generation) in [(agent, 2), (other, 1)] {
            conn.execute(
                "INSERT INTO agents (id, owner_principal, handle, display_name, description, specialties,
                                     profile_revision, controller_generation, created_at, updated_at)
                 VALUES (?1, ?2, 'h', 'H', '', '[]', 1, ?3, 1, 1)",
                (id, owner.as_str(), generation),
            )
            .unwrap();
        }
        for (id, of, generation, state) in [
            (bound, agent, 1, "replaced"),
            (forged, agent, 2, "attached"),
            (own, other, 1, "attached"),
        ] {
            conn.execute(
                "INSERT INTO agent_endpoints (id, agent_id, principal, generation, state, lease_expires_at,
                                              attached_at, updated_at, lease_micros)
                 VALUES (?1, ?2, ?3, ?4, ?5, 9000000000000000, 1, 1, 600000000)",
                (id, of, owner.as_str(), generation, state),
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count,
                                    tool_state, mcp_config, checksum, created_at, updated_at, agent_id)
             VALUES (?1, 'active', 'laptop', 'p', '[]', 0, '{}', '[]', 'c', 1, 1, ?2)",
            (t, agent),
        )
        .unwrap();
        // The binding's event, serialized as the store writes it.
        let detail = serde_json::json!({ "agentId": agent, "endpointId": bound, "generation": 1 });
        conn.execute(
            "INSERT INTO usage_events (transfer_id, type, at, detail) VALUES (?1, 'agent_bound', 1, ?2)",
            (t, detail.to_string()),
        )
        .unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), Store::supported_schema_version());
    let held: Vec<(String, i64)> = store
        .autocommit()
        .prepare("SELECT id, host_held FROM agent_endpoints ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        held,
        [(bound.to_owned(), 1), (forged.to_owned(), 0), (own.to_owned(), 0)],
        "only the binding's endpoint is the host's; a client's is never claimed as a sandbox"
    );
    assert_eq!(
        store
            .host_held_endpoints(&[bound, forged, own])
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        [bound.to_owned()]
    );
    // The transfer's agent is the host's from now on: no client attaches or detaches for it.
    let operator = Caller::full(OPERATOR_SUBJECT).unwrap();
    assert!(matches!(
        store.detach_endpoint(&operator, agent, forged),
        Err(Error::TransferBoundAgent(_))
    ));
}

#[test]
fn a_schema_14_database_counts_the_agents_it_already_holds() {
    if crate::testing::skip_on_postgres("upgrades a SQLite fixture file of an older schema") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let alice = Caller::full("account:alice").unwrap();
    let bob = Caller::full("account:bob").unwrap();
    {
        let conn = Connection::open(&path).unwrap();
        for sql in &crate::migrations::SQLITE[..14] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 14).unwrap();
        for (i, owner) in [&alice, &alice, &bob].into_iter().enumerate() {
            conn.execute(
                "INSERT INTO agents (id, owner_principal, handle, display_name, description, specialties,
                                     profile_revision, created_at, updated_at)
                 VALUES (?1, ?2, 'h', 'H', '', '[]', 1, 1, 1)",
                (format!("agt_{i:024}"), owner.principal().as_str()),
            )
            .unwrap();
        }
        // Bob's one agent is the agent a transfer became: counted in the total only.
        conn.execute(
            "INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count,
                                    tool_state, mcp_config, checksum, created_at, updated_at, agent_id)
             VALUES ('tr_000000000000000000000001', 'active', 'laptop', 'p', '[]', 0, '{}', '[]', 'c', 1, 1,
                     'agt_000000000000000000000002')",
            [],
        )
        .unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    let count = |store: &mut Store, sql: &str| -> i64 { store.autocommit().query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count(&mut store, "SELECT agents FROM agent_total"), 3);
    assert_eq!(count(&mut store, "SELECT count(*) FROM created_agents"), 1);
    assert_eq!(
        count(
            &mut store,
            "SELECT agents FROM created_agents WHERE owner_principal = (SELECT owner_principal FROM agents WHERE id = 'agt_000000000000000000000000')"
        ),
        2
    );
    store.create_agent(&alice, &card("after"), "k").unwrap();
    assert_eq!(count(&mut store, "SELECT agents FROM agent_total"), 4);
}
