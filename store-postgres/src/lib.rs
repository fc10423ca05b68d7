//! `ahp-store-postgres` — the PostgreSQL backend of ahp's store (issue 19).
//!
//! [`PgConnection`] implements [`ahp_store_sql::Connection`] over the synchronous `postgres`
//! client, so the store's domain code, written once against `ahp-store-sql`, runs on
//! PostgreSQL 15+ as it runs on SQLite. Beside it: the PostgreSQL migrations
//! ([`migrations`], the files under `store/sql/postgres/`, one per SQLite migration), a
//! backend-neutral picture of a schema read from the catalog ([`schema`]) for the test that
//! the two backends' schemas agree, and a harness that hands each test a fresh database
//! ([`testing`]).
//!
//! # Threads
//!
//! The `postgres` client runs a private tokio runtime per connection and **panics when called
//! from inside a tokio runtime**. Call a [`PgConnection`] only from blocking threads (plain
//! threads, or `tokio::task::spawn_blocking`), as the host already does for SQLite.

mod bind;
pub mod connection;
mod decode;
mod error;
pub mod migrations;
mod predicate;
pub mod schema;
pub mod signal;
pub mod testing;

pub use connection::{PgConnection, STATEMENT_CACHE_CAPACITY};
pub use signal::{Listener, Signaller};

/// A connection to the database at `url`, migrated to the current schema (under the migration
/// lock, so hosts starting together migrate once): what `ahp_store::Store::over` takes.
///
/// # Errors
///
/// The server's, or a migration's (the schema is then left as it was).
pub fn open(url: &str) -> ahp_store_sql::SqlResult<PgConnection> {
    let mut conn = PgConnection::connect(url)?;
    migrate(&mut conn)?;
    Ok(conn)
}
pub use migrations::{MIGRATION_LOCK, MIGRATIONS, Migration, migrate, migrate_to, schema_version, set_schema_version};
pub use schema::{Column, ColumnType, ForeignKey, Index, Schema, Table};
