//! The store's test databases: the same test code on either backend.
//!
//! By default a test store is a private in-memory SQLite database. With
//! `AHP_TEST_BACKEND=postgres` (and `AHP_TEST_PG` naming a server, see `.ci/postgres`) every
//! test store is instead a fresh PostgreSQL database of its own, dropped when the store is —
//! so `cargo test -p ahp-store` run twice, once per backend, is the parity check.

use std::sync::Arc;

use crate::db::Store;
use crate::error::Result;

/// The smallest snapshot a transfer starts from: no history, no tool state, no MCP servers.
pub(crate) fn bare_snapshot() -> crate::SnapshotInput {
    crate::SnapshotInput {
        source_host: "laptop".into(),
        system_prompt: "p".into(),
        message_history: vec![],
        tool_state: serde_json::json!({}),
        mcp_config: vec![],
    }
}

/// The environment variable that picks the backend of the store's tests.
pub(crate) const BACKEND_ENV: &str = "AHP_TEST_BACKEND";

/// True when this test run is on PostgreSQL.
pub(crate) fn on_postgres() -> bool {
    match std::env::var(BACKEND_ENV).as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Ok("") | Err(_) => false,
        Ok(other) => panic!("{BACKEND_ENV}={other}: expected sqlite or postgres"),
    }
}

/// A database several stores (connections) can open: a file, or a PostgreSQL database.
pub(crate) enum TestDb {
    /// A SQLite file in a temporary directory.
    Sqlite(tempfile::TempDir),
    /// A fresh PostgreSQL database, dropped with the last handle.
    Postgres(String, Arc<ahp_store_postgres::testing::DatabaseGuard>),
}

impl TestDb {
    /// A new empty database on the backend of this run.
    pub(crate) fn new() -> Self {
        if on_postgres() {
            let (url, guard) = ahp_store_postgres::testing::fresh_database()
                .unwrap_or_else(|| panic!("{BACKEND_ENV}=postgres needs AHP_TEST_PG (see .ci/postgres)"));
            Self::Postgres(url, Arc::new(guard))
        } else {
            Self::Sqlite(tempfile::tempdir().expect("a temporary directory"))
        }
    }

    /// A new connection to it, migrated.
    pub(crate) fn open(&self) -> Result<Store> {
        match self {
            Self::Sqlite(dir) => Store::open(dir.path().join("ahp.db")),
            Self::Postgres(url, guard) => {
                let conn = ahp_store_postgres::open(url)?;
                Ok(Store::over(Box::new(conn))?.keeping(Box::new(guard.clone())))
            }
        }
    }

    /// A new connection acting as host `host`, on `clock`, verifying tokens with `key` (the
    /// several-hosts tests: one such store per host).
    pub(crate) fn open_as(&self, host: &str, clock: &crate::ManualClock, key: &crate::TokenKey) -> Store {
        self.open()
            .unwrap()
            .with_clock(Arc::new(clock.clone()))
            .with_token_key(key.clone())
            .with_host_id(host)
            .unwrap()
    }
}

/// A private test store: in-memory SQLite, or a fresh PostgreSQL database of its own.
pub(crate) fn store() -> Result<Store> {
    if on_postgres() {
        TestDb::new().open()
    } else {
        Store::open_in_memory()
    }
}

/// Every row of every table, each table's rows sorted: what "changed nothing" compares, the
/// same way on both backends (SQLite's file bytes would also see free pages; PostgreSQL has no
/// such image).
pub(crate) fn dump(store: &mut Store) -> Vec<String> {
    let tables_sql = match store.dialect() {
        ahp_store_sql::Dialect::Sqlite => {
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        }
        ahp_store_sql::Dialect::Postgres => {
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1"
        }
    };
    let tx = store.autocommit();
    let tables: Vec<String> = tx
        .prepare(tables_sql)
        .unwrap()
        .query_map((), |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = Vec::new();
    for table in tables {
        let mut rows: Vec<String> = tx
            .prepare(&format!("SELECT * FROM {table}"))
            .unwrap()
            .query(())
            .unwrap()
            .iter()
            .map(|r| format!("{table}: {:?}", r.values()))
            .collect();
        rows.sort();
        out.extend(rows);
    }
    out
}

/// True (after saying so) when this run is on PostgreSQL and the calling test exercises a
/// SQLite-only test seam (`reason`): such a test returns early there.
pub(crate) fn skip_on_postgres(reason: &str) -> bool {
    let skip = on_postgres();
    if skip {
        eprintln!("skipped on PostgreSQL: {reason}");
    }
    skip
}
