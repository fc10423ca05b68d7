//! `PgConnection` as the store's `Connection`: values both ways, placeholders, transactions,
//! error kinds.

use ahp_store_postgres::{PgConnection, STATEMENT_CACHE_CAPACITY};
use ahp_store_sql::{Begin, Connection, SqlError, Value, ValueRef};

use crate::database;

fn rows(conn: &mut PgConnection, sql: &str, params: &[ValueRef<'_>]) -> Result<Vec<Vec<Value>>, SqlError> {
    let mut out = Vec::new();
    conn.query(sql, params, &mut |row| {
        out.push(row.values().to_vec());
        Ok(true)
    })?;
    Ok(out)
}

fn one(conn: &mut PgConnection, sql: &str, params: &[ValueRef<'_>]) -> Result<Value, SqlError> {
    let rows = rows(conn, sql, params)?;
    Ok(rows[0][0].clone())
}

#[test]
fn values_round_trip_through_every_column_type() {
    let Some((mut conn, _, _db)) = database() else { return };
    conn.execute_batch(
        "CREATE TABLE t (i8 BIGINT, i4 INTEGER, i2 SMALLINT, b BOOLEAN, n NUMERIC, s TEXT, v VARCHAR(10),
                         c CHAR(3), j JSONB, bytes BYTEA)",
    )
    .unwrap();
    let inserted = conn
        .execute(
            "INSERT INTO t (i8, i4, i2, b, n, s, v, c, j, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            &[
                ValueRef::Integer(i64::MIN),
                ValueRef::Integer(i64::from(i32::MAX)),
                ValueRef::Integer(i64::from(i16::MIN)),
                ValueRef::Integer(1),
                ValueRef::Integer(-123_456_789_012_345),
                ValueRef::Text("héllo ?1 'quoted'"),
                ValueRef::Text("short"),
                ValueRef::Text("ab"),
                ValueRef::Text("{\"k\": [1, 2]}"),
                ValueRef::Blob(&[0, 1, 255]),
            ],
        )
        .unwrap();
    assert_eq!(inserted, 1);
    conn.execute("INSERT INTO t (i8) VALUES (?1)", &[ValueRef::Null])
        .unwrap();
    let got = rows(
        &mut conn,
        "SELECT i8, i4, i2, b, n, s, v, c, j, bytes FROM t ORDER BY i8 NULLS LAST",
        &[],
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            vec![
                Value::Integer(i64::MIN),
                Value::Integer(i64::from(i32::MAX)),
                Value::Integer(i64::from(i16::MIN)),
                Value::Integer(1),
                Value::Integer(-123_456_789_012_345),
                Value::Text("héllo ?1 'quoted'".into()),
                Value::Text("short".into()),
                Value::Text("ab ".into()),
                Value::Text("{\"k\": [1, 2]}".into()),
                Value::Blob(vec![0, 1, 255]),
            ],
            vec![Value::Null; 10],
        ]
    );
    // A boolean expression reads as 0/1, like SQLite's.
    assert_eq!(one(&mut conn, "SELECT 1 = 2", &[]).unwrap(), Value::Integer(0));
}

#[test]
fn numeric_results_read_as_integers_when_integral() {
    let Some((mut conn, _, _db)) = database() else { return };
    conn.execute_batch("CREATE TABLE t (x BIGINT NOT NULL)").unwrap();
    for x in [i64::MAX, 5, -5] {
        conn.execute("INSERT INTO t (x) VALUES (?1)", &[ValueRef::Integer(x)])
            .unwrap();
    }
    // SUM(bigint) is NUMERIC: an integral result within i64 reads as an integer (its
    // intermediate sums may pass i64::MAX), one past it is an error, an empty sum is NULL.
    assert_eq!(
        one(&mut conn, "SELECT SUM(x) FROM t", &[]).unwrap(),
        Value::Integer(i64::MAX)
    );
    assert_eq!(
        one(&mut conn, "SELECT SUM(x) - ?1 FROM t", &[ValueRef::Integer(i64::MAX)]).unwrap(),
        Value::Integer(0)
    );
    assert!(matches!(
        one(&mut conn, "SELECT SUM(x) + ?1 FROM t", &[ValueRef::Integer(1)]),
        Err(SqlError::Conversion { column: 0, .. })
    ));
    assert_eq!(
        one(&mut conn, "SELECT SUM(x) FROM t WHERE x = 0", &[]).unwrap(),
        Value::Null
    );
    for (sql, expected) in [
        ("SELECT 0::numeric", 0),
        ("SELECT 10000::numeric", 10_000),
        ("SELECT (-10000)::numeric", -10_000),
        ("SELECT 42.000::numeric", 42),
        ("SELECT 9223372036854775807::numeric", i64::MAX),
        ("SELECT (-9223372036854775808)::numeric", i64::MIN),
    ] {
        assert_eq!(one(&mut conn, sql, &[]).unwrap(), Value::Integer(expected), "{sql}");
    }
    for (sql, message) in [
        ("SELECT 1.5::numeric", "fractional"),
        ("SELECT 9223372036854775808::numeric", "out of range"),
        ("SELECT (-9223372036854775809)::numeric", "out of range"),
        ("SELECT 'NaN'::numeric", "NaN"),
    ] {
        match one(&mut conn, sql, &[]) {
            Err(SqlError::Conversion { column: 0, message: m }) => assert!(m.contains(message), "{sql}: {m}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
    // A numeric bound parameter is encoded exactly.
    for x in [0, 1, -1, 9_999, 10_000, 100_000_000, i64::MAX, i64::MIN] {
        assert_eq!(
            one(&mut conn, "SELECT CAST(?1 AS NUMERIC)::text", &[ValueRef::Integer(x)]).unwrap(),
            Value::Text(x.to_string()),
            "{x}"
        );
    }
}

#[test]
fn types_without_a_store_value_are_named() {
    let Some((mut conn, _, _db)) = database() else { return };
    match one(&mut conn, "SELECT 1, now()", &[]) {
        Err(SqlError::Conversion { column: 1, message }) => assert!(message.contains("timestamptz"), "{message}"),
        other => panic!("{other:?}"),
    }
    match one(&mut conn, "SELECT 1.5::float8", &[]) {
        Err(SqlError::Conversion { column: 0, message }) => assert!(message.contains("float8"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn integers_bind_by_the_type_postgres_inferred_with_range_checks() {
    let Some((mut conn, _, _db)) = database() else { return };
    conn.execute_batch("CREATE TABLE t (i4 INTEGER, i2 SMALLINT, b BOOLEAN, s TEXT)")
        .unwrap();
    // At the limit and one past it.
    conn.execute(
        "INSERT INTO t (i4) VALUES (?1)",
        &[ValueRef::Integer(i64::from(i32::MAX))],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO t (i2) VALUES (?1)",
        &[ValueRef::Integer(i64::from(i16::MIN))],
    )
    .unwrap();
    for (sql, value, message) in [
        (
            "INSERT INTO t (i4) VALUES (?1)",
            i64::from(i32::MAX) + 1,
            "out of range for int4",
        ),
        (
            "INSERT INTO t (i2) VALUES (?1)",
            i64::from(i16::MIN) - 1,
            "out of range for int2",
        ),
        ("INSERT INTO t (b) VALUES (?1)", 2, "not a boolean"),
    ] {
        match conn.execute(sql, &[ValueRef::Integer(value)]) {
            Err(SqlError::Conversion { column: 0, message: m }) => {
                assert!(m.contains(message) && m.contains("parameter ?1"), "{m}")
            }
            other => panic!("{sql} {value}: {other:?}"),
        }
    }
    // An integer into a text column is its decimal text; an untyped `?1 + 1` is int4.
    conn.execute(
        "INSERT INTO t (s, b) VALUES (?1, ?2)",
        &[ValueRef::Integer(-42), ValueRef::Integer(1)],
    )
    .unwrap();
    assert_eq!(
        one(&mut conn, "SELECT s FROM t WHERE b", &[]).unwrap(),
        Value::Text("-42".into())
    );
    assert_eq!(
        one(&mut conn, "SELECT ?1 + 1", &[ValueRef::Integer(41)]).unwrap(),
        Value::Integer(42)
    );
    assert!(matches!(
        conn.execute("SELECT ?1 + 1", &[ValueRef::Integer(i64::from(i32::MAX) + 1)]),
        Err(SqlError::Conversion { .. })
    ));
    // Text and blobs refuse a placeholder of another type, by name.
    match conn.execute("INSERT INTO t (i4) VALUES (?1)", &[ValueRef::Text("7")]) {
        Err(SqlError::Conversion { column: 0, message }) => assert!(message.contains("int4"), "{message}"),
        other => panic!("{other:?}"),
    }
    match conn.execute("INSERT INTO t (s) VALUES (?1)", &[ValueRef::Blob(b"x")]) {
        Err(SqlError::Conversion { column: 0, message }) => assert!(message.contains("text"), "{message}"),
        other => panic!("{other:?}"),
    }
    // PostgreSQL text holds no NUL (SQLite's does): a clear refusal, not the server's.
    match conn.execute("INSERT INTO t (s) VALUES (?1)", &[ValueRef::Text("a\0b")]) {
        Err(SqlError::Conversion { column: 0, message }) => assert!(message.contains("NUL"), "{message}"),
        other => panic!("{other:?}"),
    }
    // Nothing of the refused inserts arrived.
    assert_eq!(
        one(&mut conn, "SELECT COUNT(*) FROM t", &[]).unwrap(),
        Value::Integer(3)
    );
}

#[test]
fn numbered_placeholders_bind_by_number_and_untyped_ones_by_value() {
    let Some((mut conn, _, _db)) = database() else { return };
    assert_eq!(
        rows(
            &mut conn,
            "SELECT ?2 || '', ?1 || '', ?2 || ''",
            &[ValueRef::Text("a"), ValueRef::Text("b")]
        )
        .unwrap(),
        vec![vec![
            Value::Text("b".into()),
            Value::Text("a".into()),
            Value::Text("b".into())
        ]]
    );
    // `?1 IS NULL` alone gives PostgreSQL no type: the statement is typed by the value bound
    // first, and stays correct for later values of other kinds.
    let sql = "SELECT 7 WHERE ?1 IS NULL";
    assert_eq!(
        rows(&mut conn, sql, &[ValueRef::Null]).unwrap(),
        vec![vec![Value::Integer(7)]]
    );
    assert_eq!(
        rows(&mut conn, sql, &[ValueRef::Integer(3)]).unwrap(),
        Vec::<Vec<Value>>::new()
    );
    assert_eq!(
        rows(&mut conn, sql, &[ValueRef::Text("x")]).unwrap(),
        Vec::<Vec<Value>>::new()
    );
    assert_eq!(
        rows(
            &mut conn,
            "SELECT 1 WHERE ?1 IS NOT NULL AND ?2 IS NULL",
            &[ValueRef::Blob(b"b"), ValueRef::Null]
        )
        .unwrap(),
        vec![vec![Value::Integer(1)]]
    );
    // The store's optional filter, `(?N IS NULL OR col = ?N)`, on a text column: null
    // bound first (the statement is typed then), then a value.
    conn.execute_batch("CREATE TABLE f (s TEXT); INSERT INTO f VALUES ('a'), ('b')")
        .unwrap();
    let filter = "SELECT s FROM f WHERE (?1 IS NULL OR s = ?1) ORDER BY s";
    assert_eq!(rows(&mut conn, filter, &[ValueRef::Null]).unwrap().len(), 2);
    assert_eq!(
        rows(&mut conn, filter, &[ValueRef::Text("b")]).unwrap(),
        vec![vec![Value::Text("b".into())]]
    );
    // Text sorts by code point, as SQLite's BINARY collation does.
    assert_eq!(
        rows(
            &mut conn,
            "SELECT x FROM (VALUES ('agt_b'), ('agtc'), ('Z'), ('é')) AS v(x) ORDER BY x",
            &[]
        )
        .unwrap(),
        ["Z", "agt_b", "agtc", "é"].map(|x| vec![Value::Text(x.into())])
    );
    // Too few or too many parameters: an error, not a guess.
    assert!(matches!(
        conn.execute("SELECT ?1::bigint, ?2::bigint", &[ValueRef::Integer(1)]),
        Err(SqlError::Backend(m)) if m.contains("2 placeholders")
    ));
}

#[test]
fn statements_are_prepared_once_and_the_cache_is_bounded() {
    let Some((mut conn, _, _db)) = database() else { return };
    for _ in 0..3 {
        conn.execute("SELECT ?1::bigint", &[ValueRef::Integer(1)]).unwrap();
    }
    assert_eq!(conn.cached_statements(), 1);
    for i in 1..STATEMENT_CACHE_CAPACITY {
        conn.execute(&format!("SELECT {i}"), &[]).unwrap();
    }
    assert_eq!(conn.cached_statements(), STATEMENT_CACHE_CAPACITY);
    conn.execute("SELECT 'one past the limit'", &[]).unwrap();
    assert_eq!(conn.cached_statements(), 1, "a full cache starts over");
    // A schema change drops the cache: a statement prepared before it still runs.
    conn.execute_batch("CREATE TABLE t (a BIGINT)").unwrap();
    conn.execute("INSERT INTO t (a) VALUES (?1)", &[ValueRef::Integer(1)])
        .unwrap();
    assert_eq!(
        rows(&mut conn, "SELECT * FROM t", &[]).unwrap(),
        vec![vec![Value::Integer(1)]]
    );
    conn.execute_batch("ALTER TABLE t ADD COLUMN b TEXT").unwrap();
    assert_eq!(
        rows(&mut conn, "SELECT * FROM t", &[]).unwrap(),
        vec![vec![Value::Integer(1), Value::Null]]
    );
    assert_eq!(conn.cached_statements(), 1);
}

#[test]
fn rollback_changes_nothing_and_commit_keeps_everything() {
    let Some((mut conn, _, _db)) = database() else { return };
    conn.execute_batch("CREATE TABLE t (a BIGINT PRIMARY KEY)").unwrap();
    conn.begin(Begin::Write).unwrap();
    conn.execute("INSERT INTO t (a) VALUES (?1)", &[ValueRef::Integer(1)])
        .unwrap();
    conn.execute("INSERT INTO t (a) VALUES (?1)", &[ValueRef::Integer(2)])
        .unwrap();
    conn.rollback().unwrap();
    assert_eq!(
        one(&mut conn, "SELECT COUNT(*) FROM t", &[]).unwrap(),
        Value::Integer(0)
    );
    conn.begin(Begin::Write).unwrap();
    conn.execute("INSERT INTO t (a) VALUES (?1)", &[ValueRef::Integer(3)])
        .unwrap();
    conn.commit().unwrap();
    // Rolling back with no transaction open is a no-op.
    conn.rollback().unwrap();
    assert_eq!(
        rows(&mut conn, "SELECT a FROM t", &[]).unwrap(),
        vec![vec![Value::Integer(3)]]
    );
    // A read transaction refuses writes and sees one snapshot.
    conn.begin(Begin::Read).unwrap();
    assert!(matches!(
        conn.execute("INSERT INTO t (a) VALUES (4)", &[]),
        Err(SqlError::Backend(m)) if m.contains("25006")
    ));
    conn.rollback().unwrap();
    assert_eq!(
        one(&mut conn, "SELECT COUNT(*) FROM t", &[]).unwrap(),
        Value::Integer(1)
    );
}

#[test]
fn a_read_transaction_sees_one_snapshot() {
    let Some((mut reader, url, _db)) = database() else {
        return;
    };
    reader.execute_batch("CREATE TABLE t (a BIGINT)").unwrap();
    let mut writer = PgConnection::connect(&url).unwrap();
    reader.begin(Begin::Read).unwrap();
    assert_eq!(
        one(&mut reader, "SELECT COUNT(*) FROM t", &[]).unwrap(),
        Value::Integer(0)
    );
    writer.execute("INSERT INTO t (a) VALUES (1)", &[]).unwrap();
    assert_eq!(
        one(&mut reader, "SELECT COUNT(*) FROM t", &[]).unwrap(),
        Value::Integer(0)
    );
    reader.commit().unwrap();
    assert_eq!(
        one(&mut reader, "SELECT COUNT(*) FROM t", &[]).unwrap(),
        Value::Integer(1)
    );
}

#[test]
fn a_serialization_conflict_between_two_writers_is_busy() {
    let Some((mut a, url, _db)) = database() else { return };
    a.execute_batch("CREATE TABLE slots (owner TEXT NOT NULL)").unwrap();
    let mut b = PgConnection::connect(&url).unwrap();
    // Write skew: each checks that the slot is free, then takes it.
    let take = |conn: &mut PgConnection, owner: &str| -> Result<(), SqlError> {
        let free = one(conn, "SELECT COUNT(*) FROM slots", &[])? == Value::Integer(0);
        assert!(free);
        conn.execute("INSERT INTO slots (owner) VALUES (?1)", &[ValueRef::Text(owner)])?;
        Ok(())
    };
    a.begin(Begin::Write).unwrap();
    b.begin(Begin::Write).unwrap();
    take(&mut a, "a").unwrap();
    take(&mut b, "b").unwrap();
    a.commit().unwrap();
    match b.commit() {
        Err(e @ SqlError::Busy(_)) => {
            assert!(e.is_transient());
            assert!(e.to_string().contains("40001"), "{e}");
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    // After the rollback, running b's transaction again sees a's row and refuses to take it.
    b.rollback().unwrap();
    assert_eq!(
        rows(&mut b, "SELECT owner FROM slots", &[]).unwrap(),
        vec![vec![Value::Text("a".into())]]
    );
}

#[test]
fn a_row_lock_not_available_is_busy() {
    let Some((mut a, url, _db)) = database() else { return };
    a.execute_batch("CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1)")
        .unwrap();
    let mut b = PgConnection::connect(&url).unwrap();
    a.begin(Begin::Write).unwrap();
    a.execute("SELECT a FROM t FOR UPDATE", &[]).unwrap();
    b.begin(Begin::Write).unwrap();
    assert!(
        matches!(b.execute("SELECT a FROM t FOR UPDATE NOWAIT", &[]), Err(SqlError::Busy(m)) if m.contains("55P03"))
    );
    b.rollback().unwrap();
    a.rollback().unwrap();
}

#[test]
fn sqlstates_are_classified() {
    let Some((mut conn, _, _db)) = database() else { return };
    for (code, kind) in [
        ("40001", "busy"),
        ("40P01", "busy"),
        ("55P03", "busy"),
        ("23505", "constraint"),
        ("23503", "constraint"),
        ("23514", "constraint"),
        ("23502", "constraint"),
        ("40002", "backend"),
        ("42601", "backend"),
        ("P0001", "backend"),
    ] {
        let sql = format!("DO $$ BEGIN RAISE EXCEPTION 'raised %', '{code}' USING ERRCODE = '{code}'; END $$");
        let e = conn.execute_batch(&sql).unwrap_err();
        let got = match &e {
            SqlError::Busy(_) => "busy",
            SqlError::Constraint(_) => "constraint",
            SqlError::Backend(_) => "backend",
            _ => "other",
        };
        assert_eq!(got, kind, "{code}: {e}");
        assert!(e.to_string().contains(code), "{code}: {e}");
    }
}

#[test]
fn constraint_violations_are_constraint_errors_and_change_nothing() {
    let Some((mut conn, _, _db)) = database() else { return };
    conn.execute_batch(
        "CREATE TABLE p (id TEXT PRIMARY KEY);
         CREATE TABLE c (id TEXT PRIMARY KEY, p TEXT NOT NULL REFERENCES p (id), n BIGINT CHECK (n >= 0));
         INSERT INTO p VALUES ('p1'); INSERT INTO c VALUES ('c1', 'p1', 0)",
    )
    .unwrap();
    for (sql, params, name) in [
        (
            "INSERT INTO c (id, p, n) VALUES (?1, ?2, ?3)",
            vec![ValueRef::Text("c1"), ValueRef::Text("p1"), ValueRef::Integer(1)],
            "c_pkey",
        ),
        (
            "INSERT INTO c (id, p, n) VALUES (?1, ?2, ?3)",
            vec![ValueRef::Text("c2"), ValueRef::Text("nope"), ValueRef::Integer(1)],
            "c_p_fkey",
        ),
        (
            "INSERT INTO c (id, p, n) VALUES (?1, ?2, ?3)",
            vec![ValueRef::Text("c2"), ValueRef::Text("p1"), ValueRef::Integer(-1)],
            "c_n_check",
        ),
        (
            "INSERT INTO c (id, p, n) VALUES (?1, ?2, ?3)",
            vec![ValueRef::Text("c2"), ValueRef::Null, ValueRef::Integer(1)],
            "null value",
        ),
    ] {
        conn.begin(Begin::Write).unwrap();
        match conn.execute(sql, &params) {
            Err(SqlError::Constraint(m)) => assert!(m.contains(name), "{m}"),
            other => panic!("{name}: {other:?}"),
        }
        conn.rollback().unwrap();
    }
    assert_eq!(
        rows(&mut conn, "SELECT id, p, n FROM c", &[]).unwrap(),
        vec![vec![
            Value::Text("c1".into()),
            Value::Text("p1".into()),
            Value::Integer(0)
        ]]
    );
}

#[test]
fn a_query_stops_when_the_row_callback_says_so() {
    let Some((mut conn, _, _db)) = database() else { return };
    let mut seen = Vec::new();
    conn.query(
        "SELECT g FROM generate_series(1, 100000) AS g ORDER BY g",
        &[],
        &mut |row| {
            seen.push(row.get::<_, i64>(0)?);
            Ok(seen.len() < 3)
        },
    )
    .unwrap();
    assert_eq!(seen, [1, 2, 3]);
    // The connection is usable at once, the rest of that result discarded.
    assert_eq!(
        one(&mut conn, "SELECT ?1::bigint", &[ValueRef::Integer(9)]).unwrap(),
        Value::Integer(9)
    );
    // A callback's error ends the query and is returned as it was.
    let e = conn
        .query("SELECT g FROM generate_series(1, 10) AS g", &[], &mut |_| {
            Err(SqlError::NoRows)
        })
        .unwrap_err();
    assert_eq!(e, SqlError::NoRows);
    assert_eq!(one(&mut conn, "SELECT 1", &[]).unwrap(), Value::Integer(1));
}

#[test]
fn a_lost_connection_is_a_backend_error_not_busy() {
    let Some((mut conn, url, _db)) = database() else { return };
    let pid = one(&mut conn, "SELECT pg_backend_pid()", &[]).unwrap();
    let Value::Integer(pid) = pid else { panic!("{pid:?}") };
    let mut killer = PgConnection::connect(&url).unwrap();
    killer
        .execute("SELECT pg_terminate_backend(?1::int)", &[ValueRef::Integer(pid)])
        .unwrap();
    for _ in 0..2 {
        match conn.execute("SELECT 1", &[]) {
            Err(e @ SqlError::Backend(_)) => assert!(!e.is_transient()),
            other => panic!("expected Backend, got {other:?}"),
        }
    }
    assert!(matches!(
        PgConnection::connect("postgres://nobody@127.0.0.1:1/none"),
        Err(SqlError::Backend(_))
    ));
}

#[test]
fn a_plan_another_hosts_migration_made_stale_is_busy_then_prepared_anew() {
    let Some((mut a, url, _db)) = database() else { return };
    a.execute_batch("CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1)")
        .unwrap();
    assert_eq!(
        rows(&mut a, "SELECT * FROM t", &[]).unwrap(),
        vec![vec![Value::Integer(1)]]
    );
    let mut b = PgConnection::connect(&url).unwrap();
    b.execute_batch("ALTER TABLE t ADD COLUMN b TEXT").unwrap();
    a.begin(Begin::Read).unwrap();
    match rows(&mut a, "SELECT * FROM t", &[]) {
        Err(e @ SqlError::Busy(_)) => assert!(e.to_string().contains("0A000"), "{e}"),
        other => panic!("expected Busy, got {other:?}"),
    }
    a.rollback().unwrap();
    // The retried transaction prepares the statement again and reads the new shape.
    a.begin(Begin::Read).unwrap();
    assert_eq!(
        rows(&mut a, "SELECT * FROM t", &[]).unwrap(),
        vec![vec![Value::Integer(1), Value::Null]]
    );
    a.commit().unwrap();
}

#[test]
fn a_lost_connection_is_reopened_at_the_next_transaction() {
    let Some((mut conn, url, _db)) = database() else { return };
    conn.execute_batch("CREATE TABLE t (a BIGINT)").unwrap();
    let Value::Integer(pid) = one(&mut conn, "SELECT pg_backend_pid()", &[]).unwrap() else {
        panic!()
    };
    let mut killer = PgConnection::connect(&url).unwrap();
    killer
        .execute("SELECT pg_terminate_backend(?1::int)", &[ValueRef::Integer(pid)])
        .unwrap();
    // The statement that finds it lost fails (inside a transaction nothing may be redone
    // silently)...
    assert!(matches!(
        conn.execute("INSERT INTO t VALUES (1)", &[]),
        Err(SqlError::Backend(_))
    ));
    // ...and the next transaction runs on a new session.
    conn.begin(Begin::Write).unwrap();
    conn.execute("INSERT INTO t (a) VALUES (?1)", &[ValueRef::Integer(2)])
        .unwrap();
    conn.commit().unwrap();
    assert_ne!(
        one(&mut conn, "SELECT pg_backend_pid()", &[]).unwrap(),
        Value::Integer(pid)
    );
    assert_eq!(
        rows(&mut conn, "SELECT a FROM t", &[]).unwrap(),
        vec![vec![Value::Integer(2)]]
    );
}
