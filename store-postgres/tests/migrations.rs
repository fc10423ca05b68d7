//! The PostgreSQL migrations: they apply in order on an empty database, a second run is a
//! no-op, a newer schema is refused, and the constraints they declare hold.

use ahp_store_postgres::{MIGRATIONS, PgConnection, migrate, migrate_to, schema, schema_version, set_schema_version};
use ahp_store_sql::{Connection, SqlError, Value, ValueRef};

use crate::database;

fn count(conn: &mut PgConnection, sql: &str) -> i64 {
    let mut n = None;
    conn.query(sql, &[], &mut |row| {
        n = Some(row.get::<_, i64>(0)?);
        Ok(false)
    })
    .unwrap();
    n.unwrap()
}

#[test]
fn migrations_are_numbered_like_sqlites() {
    let sqlite: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../store/sql"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sql"))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let postgres: Vec<String> = MIGRATIONS.iter().map(|m| m.name.to_owned()).collect();
    assert_eq!(
        postgres, sqlite,
        "one PostgreSQL migration per SQLite migration, same number and name"
    );
    for (i, m) in MIGRATIONS.iter().enumerate() {
        assert_eq!(m.version, i64::try_from(i).unwrap() + 1);
        assert!(m.name.starts_with(&format!("{:04}_", m.version)), "{}", m.name);
    }
}

#[test]
fn all_migrations_apply_once_and_a_second_run_is_a_no_op() {
    let Some((mut conn, _, _db)) = database() else { return };
    assert_eq!(schema_version(&mut conn).unwrap(), 0);
    let latest = MIGRATIONS.last().unwrap().version;
    assert_eq!(migrate(&mut conn).unwrap(), latest);
    assert_eq!(schema_version(&mut conn).unwrap(), latest);
    assert_eq!(count(&mut conn, "SELECT COUNT(*) FROM ahp_schema_version"), 1);
    let before = schema::schema(&mut conn).unwrap();
    assert_eq!(
        before.tables.len(),
        34,
        "{:?}",
        before.tables.keys().collect::<Vec<_>>()
    );
    assert_eq!(migrate(&mut conn).unwrap(), latest);
    assert_eq!(schema::schema(&mut conn).unwrap(), before);
    assert_eq!(count(&mut conn, "SELECT COUNT(*) FROM ahp_schema_version"), 1);
}

#[test]
fn migrations_apply_step_by_step_and_a_newer_schema_is_refused() {
    let Some((mut conn, _, _db)) = database() else { return };
    for m in MIGRATIONS {
        assert_eq!(migrate_to(&mut conn, m.version).unwrap(), m.version);
        assert_eq!(schema_version(&mut conn).unwrap(), m.version);
    }
    let latest = MIGRATIONS.last().unwrap().version;
    assert!(matches!(migrate_to(&mut conn, latest + 1), Err(SqlError::Backend(m)) if m.contains("no migration")));
    assert!(matches!(migrate_to(&mut conn, 3), Err(SqlError::Backend(m)) if m.contains("past 3")));
    let before = schema::schema(&mut conn).unwrap();
    set_schema_version(&mut conn, latest + 1).unwrap();
    match migrate(&mut conn) {
        Err(SqlError::Backend(m)) => assert!(m.contains("newer than this build"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(schema_version(&mut conn).unwrap(), latest + 1);
    assert_eq!(schema::schema(&mut conn).unwrap(), before);
}

#[test]
fn a_failing_migration_leaves_the_schema_as_it_was() {
    let Some((mut conn, _, _db)) = database() else { return };
    migrate_to(&mut conn, 9).unwrap();
    // A table the next migration creates already exists: 0010 fails half way.
    conn.execute_batch("CREATE TABLE goals (x BIGINT)").unwrap();
    let before = schema::schema(&mut conn).unwrap();
    match migrate(&mut conn) {
        Err(SqlError::Backend(m)) => assert!(m.contains("0010_delegation.sql") && m.contains("42P07"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(schema_version(&mut conn).unwrap(), 9);
    assert_eq!(
        schema::schema(&mut conn).unwrap(),
        before,
        "the ALTERs on wakes were rolled back"
    );
}

/// Inserts one row of `table` with `columns = values` (text literals), reporting the error.
fn insert(conn: &mut PgConnection, sql: &str, params: &[ValueRef<'_>]) -> Result<u64, SqlError> {
    conn.execute(sql, params)
}

#[test]
fn the_schema_enforces_what_the_sqlite_schema_enforces() {
    let Some((mut conn, _, _db)) = database() else { return };
    migrate(&mut conn).unwrap();
    // components.digest: SQLite's GLOB 'sha256:*' and length 71, as LIKE; at 71 and one past.
    let digest = format!("sha256:{}", "a".repeat(64));
    let add = "INSERT INTO components (digest, name, size_bytes, registered_at) VALUES (?1, NULL, 1, 0)";
    insert(&mut conn, add, &[ValueRef::Text(&digest)]).unwrap();
    for bad in [
        format!("{digest}a"),
        format!("SHA256:{}", "a".repeat(64)),
        format!("md5:{}", "a".repeat(67)),
    ] {
        assert!(
            matches!(insert(&mut conn, add, &[ValueRef::Text(&bad)]), Err(SqlError::Constraint(m)) if m.contains("components_digest_check")),
            "{bad}"
        );
    }
    // Defaults and checks of the agent tables; identity columns assign themselves, in order.
    conn.execute_batch(
        "INSERT INTO agents (id, owner_principal, handle, display_name, description, specialties, profile_revision, created_at, updated_at)
         VALUES ('agt_1', 'p', 'h', 'd', '', '[]', 1, 0, 0)",
    )
    .unwrap();
    assert_eq!(count(&mut conn, "SELECT controller_generation FROM agents"), 0);
    let wake = "INSERT INTO wakes (id, agent_id, state, delivery_count, first_delivery_order, high_water_order, created_at, updated_at)
                VALUES (?1, 'agt_1', 'consumed', ?2, 0, 0, 0, 0)";
    // 0010 relaxed `delivery_count >= 1` to `>= 0`: 0 is allowed, -1 is not.
    insert(&mut conn, wake, &[ValueRef::Text("wk_0"), ValueRef::Integer(0)]).unwrap();
    assert!(matches!(
        insert(&mut conn, wake, &[ValueRef::Text("wk_m"), ValueRef::Integer(-1)]),
        Err(SqlError::Constraint(_))
    ));
    let origin = {
        let mut v = Value::Null;
        conn.query("SELECT origin FROM wakes WHERE id = 'wk_0'", &[], &mut |r| {
            v = r.get(0)?;
            Ok(false)
        })
        .unwrap();
        v
    };
    assert_eq!(origin, Value::Text("message".into()));
    // At most one open wake per agent (a partial unique index).
    insert(
        &mut conn,
        &wake.replace("'consumed'", "'pending'"),
        &[ValueRef::Text("wk_1"), ValueRef::Integer(1)],
    )
    .unwrap();
    assert!(matches!(
        insert(&mut conn, &wake.replace("'consumed'", "'claimed'"), &[ValueRef::Text("wk_2"), ValueRef::Integer(1)]),
        Err(SqlError::Constraint(m)) if m.contains("wakes_one_open")
    ));
    for i in 1..=3 {
        conn.execute(
            "INSERT INTO communication_events (at, kind, agent_id, conversation_id, detail) VALUES (?1, 'k', NULL, NULL, '{}')",
            &[ValueRef::Integer(i)],
        )
        .unwrap();
    }
    assert_eq!(count(&mut conn, "SELECT SUM(id) FROM communication_events"), 6);
    // agent_waits.source_count BETWEEN 1 AND 8: at each limit and one past.
    let wait =
        "INSERT INTO agent_waits (id, owner_principal, agent_id, mode, state, source_count, created_at, updated_at)
                VALUES (?1, 'p', 'agt_1', 'any', 'waiting', ?2, 0, 0)";
    for (n, ok) in [(0, false), (1, true), (8, true), (9, false)] {
        let id = format!("wait_{n}");
        assert_eq!(
            insert(&mut conn, wait, &[ValueRef::Text(&id), ValueRef::Integer(n)]).is_ok(),
            ok,
            "{n}"
        );
    }
    // model_calls: status and outcome agree.
    let call = "INSERT INTO model_calls (id, transfer_id, model, status, price_input, price_output, price_cache_read,
                price_cache_write, input_tokens_bound, max_output_tokens, reserved_micro_usd, reserved_at, outcome)
                VALUES ('mc_1', 't', 'm', 'reserved', 0, 0, 0, 0, 0, 1, 0, 0, ?1)";
    conn.execute_batch(
        "INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count, tool_state,
         mcp_config, checksum, created_at, updated_at) VALUES ('t', 'pushed', 'h', '', '[]', 0, '{}', '[]', 'c', 0, 0)",
    )
    .unwrap();
    assert!(matches!(
        insert(&mut conn, call, &[ValueRef::Text("completed")]),
        Err(SqlError::Constraint(_))
    ));
    insert(&mut conn, call, &[ValueRef::Null]).unwrap();
    assert_eq!(
        count(
            &mut conn,
            "SELECT COUNT(*) FROM transfers WHERE owner_subject = 'operator:local'"
        ),
        1
    );
}

#[test]
fn migration_7_marks_exactly_the_endpoints_a_binding_attached() {
    let Some((mut conn, _, _db)) = database() else { return };
    migrate_to(&mut conn, 6).unwrap();
    conn.execute_batch(
        "INSERT INTO agents (id, owner_principal, handle, display_name, description, specialties, profile_revision, created_at, updated_at)
         VALUES ('agt_1', 'p', 'h', 'd', '', '[]', 1, 0, 0);
         INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count, tool_state,
                                mcp_config, checksum, created_at, updated_at, agent_id)
         VALUES ('t1', 'active', 'h', '', '[]', 0, '{}', '[]', 'c', 0, 0, 'agt_1');
         INSERT INTO agent_endpoints (id, agent_id, principal, generation, state, lease_expires_at, attached_at, updated_at)
         VALUES ('ep_bound', 'agt_1', 'p', 1, 'detached', 0, 0, 0),
                ('ep_client', 'agt_1', 'p', 2, 'attached', 0, 0, 0);
         INSERT INTO usage_events (transfer_id, type, at, detail)
         VALUES ('t1', 'agent_bound', 0, '{\"agentId\":\"agt_1\",\"endpointId\":\"ep_bound\"}'),
                ('t1', 'agent_bound_not', 0, '{\"endpointId\":\"ep_client\"}');",
    )
    .unwrap();
    migrate_to(&mut conn, 7).unwrap();
    let mut held = Vec::new();
    conn.query("SELECT id, host_held FROM agent_endpoints ORDER BY id", &[], &mut |r| {
        held.push((r.get::<_, String>(0)?, r.get::<_, i64>(1)?));
        Ok(true)
    })
    .unwrap();
    assert_eq!(held, [("ep_bound".to_owned(), 1), ("ep_client".to_owned(), 0)]);
}

#[test]
fn hosts_migrating_at_once_migrate_once() {
    let Some((_, url, _db)) = database() else { return };
    let latest = MIGRATIONS.last().unwrap().version;
    let hosts: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut conn = PgConnection::connect(&url).unwrap();
                migrate(&mut conn)
            })
        })
        .collect();
    for host in hosts {
        assert_eq!(host.join().unwrap(), Ok(latest));
    }
    let mut conn = PgConnection::connect(&url).unwrap();
    assert_eq!(count(&mut conn, "SELECT COUNT(*) FROM ahp_schema_version"), 1);
    assert_eq!(schema_version(&mut conn).unwrap(), latest);
    // The lock is released: a later migration run takes it again at once.
    assert_eq!(migrate(&mut conn).unwrap(), latest);
    assert_eq!(
        count(
            &mut conn,
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory'
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ),
        0
    );
}
