//! Schema introspection: the shape of one table, and the schema-agreement test — after the
//! first N migrations of each backend, SQLite's schema and PostgreSQL's are the same, for
//! every N.

use std::collections::{BTreeMap, BTreeSet};

use ahp_store_postgres::schema::{self, normalize_expression, normalize_predicate};
use ahp_store_postgres::{Column, ColumnType, ForeignKey, Index, MIGRATIONS, Schema, Table, migrate, migrate_to};

use crate::database;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn introspection_reads_a_tables_columns_keys_and_indexes() {
    let Some((mut conn, _, _db)) = database() else { return };
    migrate(&mut conn).unwrap();
    let schema = schema::schema(&mut conn).unwrap();
    assert!(!schema.tables.contains_key("ahp_schema_version"));
    let endpoints = &schema.tables["agent_endpoints"];
    let column = |ty, not_null, default: Option<&str>| Column {
        ty,
        not_null,
        default: default.map(str::to_owned),
        identity: false,
    };
    let expected: BTreeMap<String, Column> = [
        ("id", column(ColumnType::Text, true, None)),
        ("agent_id", column(ColumnType::Text, true, None)),
        ("principal", column(ColumnType::Text, true, None)),
        ("generation", column(ColumnType::Integer, true, None)),
        ("state", column(ColumnType::Text, true, None)),
        ("lease_expires_at", column(ColumnType::Integer, true, None)),
        ("wake_capable", column(ColumnType::Integer, true, Some("0"))),
        ("attached_at", column(ColumnType::Integer, true, None)),
        ("updated_at", column(ColumnType::Integer, true, None)),
        ("ended_at", column(ColumnType::Integer, false, None)),
        ("lease_micros", column(ColumnType::Integer, false, None)),
        ("host_held", column(ColumnType::Integer, true, Some("0"))),
        ("host_id", column(ColumnType::Text, false, None)),
        ("app_binding_hash", column(ColumnType::Text, false, None)),
        ("app_window_hash", column(ColumnType::Text, false, None)),
        ("app_host_id", column(ColumnType::Text, false, None)),
    ]
    .into_iter()
    .map(|(n, c)| (n.to_owned(), c))
    .collect();
    assert_eq!(endpoints.columns, expected);
    assert_eq!(endpoints.primary_key, names(&["id"]));
    // generation >= 1, wake_capable IN (0, 1), host_held IN (0, 1).
    assert_eq!(endpoints.checks, 3);
    assert_eq!(endpoints.unique, BTreeSet::from([names(&["agent_id", "generation"])]));
    assert_eq!(
        endpoints.foreign_keys,
        BTreeSet::from([ForeignKey {
            columns: names(&["agent_id"]),
            references: "agents".into(),
            referenced_columns: names(&["id"]),
        }])
    );
    assert_eq!(
        endpoints.indexes,
        BTreeMap::from([
            (
                "agent_endpoints_one_attached".to_owned(),
                Index {
                    columns: names(&["agent_id"]),
                    unique: true,
                    predicate: Some("state = 'attached'".into()),
                }
            ),
            (
                "agent_endpoints_carried_by_lease".to_owned(),
                Index {
                    columns: names(&["host_id", "lease_expires_at"]),
                    unique: false,
                    predicate: Some("state = 'attached' AND host_held = 1 AND wake_capable = 1".into()),
                }
            ),
            (
                "agent_endpoints_by_host".to_owned(),
                Index {
                    columns: names(&["host_id", "state"]),
                    unique: false,
                    predicate: None,
                }
            ),
        ])
    );
    // An identity column, a text default, a two-condition partial index.
    assert!(schema.tables["usage_events"].columns["id"].identity);
    // A key of two columns, in key order (migration 0013: the inbox keyed by recipient).
    assert!(!schema.tables["deliveries"].columns["delivery_order"].identity);
    assert_eq!(
        schema.tables["deliveries"].primary_key,
        names(&["recipient_agent_id", "delivery_order"])
    );
    assert_eq!(
        schema.tables["wake_attempts"].columns["kind"].default.as_deref(),
        Some("'host'")
    );
    assert_eq!(
        schema.tables["transfers"].indexes["transfers_bound_active"]
            .predicate
            .as_deref(),
        Some("status = 'active' AND agent_id IS NOT NULL")
    );
}

/// The same [`Schema`] read from SQLite (the lead's store will own this reader).
fn sqlite_schema(db: &rusqlite::Connection) -> Schema {
    let mut schema = Schema::default();
    let tables: Vec<(String, String)> = db
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (name, sql) in tables {
        let mut table = Table {
            checks: check_keywords(&sql),
            ..Table::default()
        };
        let mut pk: Vec<(i64, String)> = Vec::new();
        let mut declared = BTreeMap::new();
        let mut stmt = db.prepare(&format!("PRAGMA table_info(\"{name}\")")).unwrap();
        let mut rows = stmt.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let column: String = r.get(1).unwrap();
            let ty: String = r.get(2).unwrap();
            let not_null: bool = r.get(3).unwrap();
            let default: Option<String> = r.get(4).unwrap();
            let key: i64 = r.get(5).unwrap();
            if key > 0 {
                pk.push((key, column.clone()));
            }
            declared.insert(column.clone(), ty.clone());
            table.columns.insert(
                column,
                Column {
                    ty: ColumnType::from_declared(&ty),
                    not_null: not_null || key > 0,
                    default: default.as_deref().map(normalize_expression),
                    identity: false,
                },
            );
        }
        pk.sort();
        table.primary_key = pk.into_iter().map(|(_, c)| c).collect();
        let mut has_pk_index = false;
        let indexes: Vec<(String, bool, String, bool)> = db
            .prepare(&format!("PRAGMA index_list(\"{name}\")"))
            .unwrap()
            .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (index, unique, origin, partial) in indexes {
            let columns: Vec<String> = db
                .prepare(&format!("PRAGMA index_info(\"{index}\")"))
                .unwrap()
                .query_map([], |r| r.get(2))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            match origin.as_str() {
                "pk" => has_pk_index = true,
                "u" => {
                    table.unique.insert(columns);
                }
                _ => {
                    let predicate = partial.then(|| {
                        let sql: String = db
                            .query_row(
                                "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1",
                                [&index],
                                |r| r.get(0),
                            )
                            .unwrap();
                        let at = sql
                            .to_ascii_uppercase()
                            .rfind(" WHERE ")
                            .expect("a partial index has a WHERE");
                        normalize_predicate(&sql[at + 7..])
                    });
                    table.indexes.insert(
                        index,
                        Index {
                            columns,
                            unique,
                            predicate,
                        },
                    );
                }
            }
        }
        // The rowid alias: a rowid table's single INTEGER PRIMARY KEY column.
        if let [key] = table.primary_key.as_slice()
            && !has_pk_index
            && declared[key].eq_ignore_ascii_case("INTEGER")
        {
            table.columns.get_mut(key).unwrap().identity = true;
        }
        let fks: Vec<(i64, String, String, String)> = db
            .prepare(&format!("PRAGMA foreign_key_list(\"{name}\")"))
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut by_id: BTreeMap<i64, ForeignKey> = BTreeMap::new();
        for (id, references, from, to) in fks {
            let fk = by_id.entry(id).or_insert_with(|| ForeignKey {
                columns: Vec::new(),
                references,
                referenced_columns: Vec::new(),
            });
            fk.columns.push(from);
            fk.referenced_columns.push(to);
        }
        table.foreign_keys = by_id.into_values().collect();
        schema.tables.insert(name, table);
    }
    schema
}

/// `CHECK` keywords of a `CREATE TABLE` text, outside `--` comments and literals.
fn check_keywords(sql: &str) -> usize {
    let mut code = String::new();
    for line in sql.lines() {
        let mut in_literal = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => in_literal = !in_literal,
                '-' if !in_literal && chars.peek() == Some(&'-') => break,
                _ if in_literal => {}
                _ => code.push(c),
            }
        }
        code.push(' ');
    }
    code.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| w.eq_ignore_ascii_case("check"))
        .count()
}

#[test]
fn sqlite_and_postgres_schemas_agree_after_every_migration() {
    let Some((mut conn, _, _db)) = database() else { return };
    let sqlite = rusqlite::Connection::open_in_memory().unwrap();
    sqlite.pragma_update(None, "foreign_keys", true).unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../store/sql");
    for m in MIGRATIONS {
        let sql = std::fs::read_to_string(format!("{dir}/{}", m.name)).unwrap();
        sqlite.execute_batch(&format!("BEGIN; {sql}; COMMIT;")).unwrap();
        migrate_to(&mut conn, m.version).unwrap();
        let lite = sqlite_schema(&sqlite);
        let pg = schema::schema(&mut conn).unwrap();
        assert_eq!(
            lite.tables.keys().collect::<Vec<_>>(),
            pg.tables.keys().collect::<Vec<_>>(),
            "tables after {}",
            m.name
        );
        for (name, table) in &lite.tables {
            assert_eq!(
                table, &pg.tables[name],
                "table {name} after {} (left SQLite, right PostgreSQL)",
                m.name
            );
        }
    }
}
