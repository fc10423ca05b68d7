//! The PostgreSQL migrations (`store/sql/postgres/NNNN_*.sql`), one per SQLite migration with
//! the same number and name, and the version table that records how many have run.
//!
//! After the first `N` migrations the PostgreSQL schema equals SQLite's after its first `N`
//! (the schema-agreement test checks it). The version lives in
//! `ahp_schema_version(version BIGINT NOT NULL)`, one row, the PostgreSQL counterpart of
//! SQLite's `PRAGMA user_version`.

use ahp_store_sql::{Begin, Connection, SqlError, SqlResult, ValueRef};

/// One migration: its number (from 1), its name and its SQL.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The number, as in the file name.
    pub version: i64,
    /// The file name.
    pub name: &'static str,
    /// The statements.
    pub sql: &'static str,
}

macro_rules! migrations {
    ($($version:literal $name:literal),* $(,)?) => {
        &[$(Migration {
            version: $version,
            name: $name,
            sql: include_str!(concat!("../../store/sql/postgres/", $name)),
        }),*]
    };
}

/// Every PostgreSQL migration, in order (the one list, shared with SQLite:
/// `store/sql/migrations.rs`).
pub const MIGRATIONS: &[Migration] = include!("../../store/sql/migrations.rs");

const CREATE_VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS ahp_schema_version (version BIGINT NOT NULL)";

/// The schema version recorded in `ahp_schema_version` (0 when the table is empty or absent).
///
/// # Errors
///
/// The backend's error; [`SqlError::Backend`] when the table holds more than one row.
pub fn schema_version(conn: &mut dyn Connection) -> SqlResult<i64> {
    let mut exists = false;
    conn.query(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'ahp_schema_version'",
        &[],
        &mut |_| {
            exists = true;
            Ok(false)
        },
    )?;
    if !exists {
        return Ok(0);
    }
    let mut versions = Vec::new();
    conn.query("SELECT version FROM ahp_schema_version", &[], &mut |row| {
        versions.push(row.get::<_, i64>(0)?);
        Ok(true)
    })?;
    match versions.as_slice() {
        [] => Ok(0),
        [v] => Ok(*v),
        _ => Err(SqlError::Backend(format!(
            "ahp_schema_version holds {} rows; it must hold one",
            versions.len()
        ))),
    }
}

/// Records `version` as the schema version (creating the table on first use). Run it in the
/// transaction of the migration it records.
///
/// # Errors
///
/// The backend's error.
pub fn set_schema_version(conn: &mut dyn Connection, version: i64) -> SqlResult<()> {
    conn.execute(CREATE_VERSION_TABLE, &[])?;
    conn.execute("DELETE FROM ahp_schema_version", &[])?;
    conn.execute(
        "INSERT INTO ahp_schema_version (version) VALUES (?1)",
        &[ValueRef::Integer(version)],
    )?;
    Ok(())
}

/// Applies every migration above the recorded version, all in one serializable transaction
/// (PostgreSQL's DDL is transactional: a failure leaves the schema as it was), and returns
/// the version reached. A second run finds nothing to do. Hosts migrating at once queue on
/// a session advisory lock ([`MIGRATION_LOCK`]) taken *before* the transaction begins, so
/// the one that waited starts its snapshot after the other's commit and finds the work done.
///
/// # Errors
///
/// The backend's error; [`SqlError::Backend`] when the database's version is newer than
/// this build knows (an older build must not write a newer schema).
pub fn migrate(conn: &mut dyn Connection) -> SqlResult<i64> {
    migrate_to(conn, MIGRATIONS.last().map_or(0, |m| m.version))
}

/// The advisory lock key migrations hold (`pg_advisory_lock`): the bytes `ahp_migr`.
pub const MIGRATION_LOCK: i64 = 0x6168_705f_6d69_6772;

/// Like [`migrate`], but stops after migration `target` (for tests of a schema's history).
///
/// # Errors
///
/// As [`migrate`]; [`SqlError::Backend`] when the database is already past `target` or
/// `target` is no migration's number.
pub fn migrate_to(conn: &mut dyn Connection, target: i64) -> SqlResult<i64> {
    // Polled rather than waited for, so the session's `lock_timeout` (which bounds every other
    // wait) does not cut a long migration of another host short.
    loop {
        let mut locked = false;
        conn.query(
            "SELECT pg_try_advisory_lock(?1)",
            &[ValueRef::Integer(MIGRATION_LOCK)],
            &mut |r| {
                locked = r.get::<_, bool>(0)?;
                Ok(false)
            },
        )?;
        if locked {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let result = migrate_locked(conn, target);
    let unlocked = conn.execute("SELECT pg_advisory_unlock(?1)", &[ValueRef::Integer(MIGRATION_LOCK)]);
    let version = result?;
    unlocked?;
    Ok(version)
}

fn migrate_locked(conn: &mut dyn Connection, target: i64) -> SqlResult<i64> {
    conn.begin(Begin::Write)?;
    match migrate_in_transaction(conn, target) {
        Ok(version) => {
            conn.commit()?;
            Ok(version)
        }
        Err(e) => {
            let _ = conn.rollback();
            Err(e)
        }
    }
}

fn migrate_in_transaction(conn: &mut dyn Connection, target: i64) -> SqlResult<i64> {
    let latest = MIGRATIONS.last().map_or(0, |m| m.version);
    if !(0..=latest).contains(&target) {
        return Err(SqlError::Backend(format!(
            "no migration {target}: this build knows 1 to {latest}"
        )));
    }
    let current = schema_version(conn)?;
    if current > latest {
        return Err(SqlError::Backend(format!(
            "the database's schema version {current} is newer than this build's {latest}"
        )));
    }
    if current > target {
        return Err(SqlError::Backend(format!(
            "the database's schema version {current} is past {target}"
        )));
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > current && m.version <= target) {
        conn.execute_batch(migration.sql).map_err(|e| match e {
            SqlError::Backend(m) => SqlError::Backend(format!("migration {}: {m}", migration.name)),
            other => other,
        })?;
        set_schema_version(conn, migration.version)?;
    }
    Ok(target)
}
