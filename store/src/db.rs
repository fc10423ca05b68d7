//! Opening the database: pragmas, migrations and the [`Store`] handle.
//!
//! Durability is deliberate: the database runs in WAL mode with `synchronous=FULL`, so every
//! committed transaction has been fsynced before the call that made it returns. A consumed
//! transfer token or an activation must survive a power loss — otherwise a replayed token could
//! succeed twice, or an orchestrator could stop its source loop after seeing `active` for a
//! transfer the database then forgets. Each state transition is one `BEGIN IMMEDIATE`
//! transaction, so it costs at most one fsync of the WAL.
//!
//! **Busy databases.** Every transfer write goes through `Store::write`: one `BEGIN
//! IMMEDIATE` transaction that, when SQLite reports the database busy or locked (another
//! process holds the write lock past [`BUSY_TIMEOUT`], or a lock could not be taken at all),
//! is rolled back and run again from the start, at most [`MAX_WRITE_ATTEMPTS`] times with
//! growing pauses. A rolled-back attempt changed nothing — no token consumed, no transfer
//! moved — so retrying is always safe; when every attempt finds the database busy the caller
//! gets [`Error::Busy`], which [`Error::is_transient`] tells apart from a refusal.
//!
//! Migrations are the files `store/sql/NNNN_*.sql`, applied in order inside one immediate
//! transaction and recorded in `PRAGMA user_version` (the pattern of Mozilla's
//! application-services). A database whose version is newer than this build knows is refused.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::clock::{Clock, SystemClock, Timestamp};
use crate::error::{Error, Result};
use crate::token::TokenKey;

/// The schema migrations, in order; the database's `user_version` is how many have run.
const MIGRATIONS: &[&str] = &[
    include_str!("../sql/0001_transfers.sql"),
    include_str!("../sql/0002_conversation.sql"),
    include_str!("../sql/0003_principals.sql"),
    include_str!("../sql/0004_sandbox.sql"),
    include_str!("../sql/0005_conversation_audit.sql"),
    include_str!("../sql/0006_transfer_agents.sql"),
    include_str!("../sql/0007_host_held_endpoints.sql"),
    include_str!("../sql/0008_usage_events_by_kind.sql"),
    // 0009 is another branch's; the lead orders the two at merge.
    include_str!("../sql/0010_delegation.sql"),
];

/// How long a connection waits for another writer before failing with `SQLITE_BUSY`.
///
/// Writers hold the lock for one short transaction; five seconds covers a deep queue of them
/// on a slow disk while still surfacing a wedged writer.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Most attempts `Store::write` makes at one transaction while the database is busy. With
/// [`BUSY_TIMEOUT`] per attempt a wedged writer is reported after about 20 s; a transient
/// lock (a checkpoint, a second process's short write) is ridden out.
pub const MAX_WRITE_ATTEMPTS: u32 = 4;

/// Pause before the second attempt; each later pause is four times the one before
/// (10, 40, 160 ms): long enough for a competing writer's commit (one fsync), short next to
/// the busy timeout.
pub const FIRST_WRITE_BACKOFF: Duration = Duration::from_millis(10);

/// Prepared statements kept per connection. The store has about 80 distinct statements and a
/// turn of a sandbox cycles through a dozen of them; rusqlite's default of 16 evicted hot ones,
/// and re-parsing SQL was a measurable part of every transition (BENCHMARKS.md).
const STATEMENT_CACHE_CAPACITY: usize = 128;

/// A connection to ahp's system of record, with its clock and (optionally) the transfer-token key.
///
/// A `Store` is one SQLite connection: `Send`, not `Sync`. Open one per thread, or funnel writes
/// through one owner; SQLite serializes writers either way.
#[derive(Debug)]
pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) token_key: Option<TokenKey>,
    /// Faults a test armed ([`crate::fault`]); `None` unless one did.
    pub(crate) faults: Option<Arc<crate::fault::FaultPlan>>,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    ///
    /// # Errors
    ///
    /// [`Error::SchemaTooNew`] if the file was written by a newer ahp; [`Error::Sqlite`] if it
    /// cannot be opened or is not a database.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))?;
        Self::setup(conn)
    }

    /// A fresh private in-memory database, for tests.
    ///
    /// # Errors
    ///
    /// Only if SQLite itself fails.
    pub fn open_in_memory() -> Result<Self> {
        Self::setup(Connection::open_in_memory()?)
    }

    fn setup(mut conn: Connection) -> Result<Self> {
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        migrate(&mut conn)?;
        Ok(Self {
            conn,
            clock: Arc::new(SystemClock),
            token_key: None,
            faults: None,
        })
    }

    /// Waits at most `timeout` for another connection's write lock before an attempt counts as
    /// busy (default [`BUSY_TIMEOUT`]).
    ///
    /// # Errors
    ///
    /// Only if SQLite refuses the setting.
    pub fn with_busy_timeout(self, timeout: Duration) -> Result<Self> {
        self.conn.busy_timeout(timeout)?;
        Ok(self)
    }

    /// Uses `clock` for every timestamp and deadline from now on.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Verifies transfer tokens with `key` (needed by `provision_runtime` and `begin_activation`).
    pub fn with_token_key(mut self, key: TokenKey) -> Self {
        self.token_key = Some(key);
        self
    }

    /// The current time by this store's clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The database's schema version (`PRAGMA user_version`).
    ///
    /// # Errors
    ///
    /// Only if SQLite fails.
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self.conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
    }

    /// The newest schema version this build knows.
    pub fn supported_schema_version() -> i64 {
        MIGRATIONS.len() as i64
    }

    /// The raw connection, bypassing every invariant: for diagnostics and tests only.
    #[doc(hidden)]
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Starts a `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so a writer
    /// waits on `busy_timeout` instead of failing on upgrade.
    pub(crate) fn immediate(&mut self) -> Result<Transaction<'_>> {
        Ok(self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?)
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction and commits it; when SQLite reports the
    /// database busy or locked (at `BEGIN`, inside `body`, or at `COMMIT`) the attempt is rolled
    /// back and `body` runs again, up to [`MAX_WRITE_ATTEMPTS`] times (see the module docs).
    /// `body` gets the transaction and the token key, borrowed apart from the connection.
    ///
    /// # Errors
    ///
    /// `body`'s error (the transaction rolled back); [`Error::Busy`] when every attempt found
    /// the database busy.
    pub(crate) fn write<T>(
        &mut self,
        mut body: impl FnMut(&Transaction<'_>, Option<&TokenKey>) -> Result<T>,
    ) -> Result<T> {
        let key = self.token_key.as_ref();
        let mut backoff = FIRST_WRITE_BACKOFF;
        for attempt in 1..=MAX_WRITE_ATTEMPTS {
            let outcome = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(Error::from)
                .and_then(|tx| {
                    let value = body(&tx, key)?;
                    tx.commit()?;
                    Ok(value)
                });
            match outcome {
                Err(e) if e.is_transient() && attempt < MAX_WRITE_ATTEMPTS => {
                    std::thread::sleep(backoff);
                    backoff *= 4;
                }
                Err(e) if e.is_transient() => return Err(Error::Busy { attempts: attempt }),
                other => return other,
            }
        }
        unreachable!("the last attempt returns")
    }
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let supported = MIGRATIONS.len() as i64;
    if found > supported {
        return Err(Error::SchemaTooNew { found, supported });
    }
    for sql in &MIGRATIONS[usize::try_from(found).unwrap_or(0)..] {
        tx.execute_batch(sql)?;
    }
    if found != supported {
        tx.pragma_update(None, "user_version", supported)?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_migrates_and_reopens_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ahp.db");
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), Store::supported_schema_version());
        let mode: String = store
            .conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let sync: i64 = store
            .conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap();
        assert_eq!(sync, 2, "synchronous=FULL");
        let fk: i64 = store
            .conn
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
        drop(store);
        let again = Store::open(&path).unwrap();
        assert_eq!(again.schema_version().unwrap(), Store::supported_schema_version());
    }

    #[test]
    fn upgrades_a_database_of_every_older_schema_keeping_its_rows() {
        for version in 1..=MIGRATIONS.len() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("old.db");
            {
                // A fixture database as an older build left it: only the first `version` migrations.
                let conn = Connection::open(&path).unwrap();
                for sql in &MIGRATIONS[..version] {
                    conn.execute_batch(sql).unwrap();
                }
                conn.pragma_update(None, "user_version", version as i64).unwrap();
                conn.execute(
                    "INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count,
                                            tool_state, mcp_config, checksum, created_at, updated_at)
                     VALUES ('tr_000000000000000000000001', 'staged', 'h', '', '[]', 0, '{}', '[]', 'c', 1, 1),
                            ('tr_000000000000000000000002', 'active', 'h', '', '[]', 0, '{}', '[]', 'c', 1, 1)",
                    [],
                )
                .unwrap();
            }
            let mut store = Store::open(&path).unwrap();
            assert_eq!(store.schema_version().unwrap(), Store::supported_schema_version());
            let t = store.transfer("tr_000000000000000000000001").unwrap();
            assert_eq!(t.status, crate::TransferStatus::Staged);
            // Transfers from before ownership belong to the operator and are bound to no agent.
            assert_eq!(t.owner_subject, crate::OPERATOR_SUBJECT, "from version {version}");
            assert_eq!(t.owner().unwrap(), crate::TransferOwner::Operator);
            assert_eq!(t.agent_id, None);
            assert!(store.bound_active_transfers(None, 10).unwrap().is_empty());
            // A transfer active across the upgrade is bound (by the host, at takeover) to an
            // agent of the operator's.
            let b = store
                .bind_transfer_agent("tr_000000000000000000000002", Duration::from_secs(60))
                .unwrap();
            let operator = crate::TransferOwner::Operator.caller().unwrap();
            assert_eq!(store.get_agent(&operator, &b.agent.id).unwrap().id, b.agent.id);
            assert_eq!(
                store.bound_active_transfers(None, 10).unwrap(),
                [("tr_000000000000000000000002".to_owned(), b.agent.id.clone())]
            );
            // The upgraded database takes new owned transfers.
            let snapshot = crate::SnapshotInput {
                source_host: "h".into(),
                system_prompt: String::new(),
                message_history: vec![],
                tool_state: serde_json::json!({}),
                mcp_config: vec![],
            };
            let owner = crate::TransferOwner::ApiKey("prn_0123456789abcdef01234567".into());
            let new = store.snapshot_state_as(&snapshot, &owner).unwrap();
            assert_eq!(store.transfer(&new.id).unwrap().owner().unwrap(), owner);
        }
    }

    #[test]
    fn refuses_a_newer_schema_and_leaves_it_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ahp.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", 999).unwrap();
        }
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(err, Error::SchemaTooNew { found: 999, supported } if supported == Store::supported_schema_version())
        );
        assert!(err.to_string().contains("newer than this build supports"));
        let conn = Connection::open(&path).unwrap();
        let v: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, 999);
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema WHERE type = 'table'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(tables, 0);
    }
}
