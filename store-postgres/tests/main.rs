//! The PostgreSQL backend's tests, against a real server: each test gets a fresh database
//! from `AHP_TEST_PG` (see `ahp_store_postgres::testing`) and is skipped, saying so, without it.

mod connection;
mod migrations;
mod schema;
mod signal;

use ahp_store_postgres::PgConnection;
use ahp_store_postgres::testing::{DatabaseGuard, fresh_database};

/// A connection to a fresh database, or `None` when the PostgreSQL suites are skipped.
fn database() -> Option<(PgConnection, String, DatabaseGuard)> {
    let (url, guard) = fresh_database()?;
    let conn = PgConnection::connect(&url).expect("connect to the fresh database");
    Some((conn, url, guard))
}
