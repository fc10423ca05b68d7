//! Opening the database: pragmas, migrations and the [`Store`] handle.
//!
//! Durability is deliberate: the database runs in WAL mode with `synchronous=FULL`, so every
//! committed transaction has been fsynced before the call that made it returns. A consumed
//! transfer token or an activation must survive a power loss — otherwise a replayed token could
//! succeed twice, or an orchestrator could stop its source loop after seeing `active` for a
//! transfer the database then forgets. Each state transition is one `BEGIN IMMEDIATE`
//! transaction, so it costs at most one fsync of the WAL.
//!
//! **Busy databases.** Every write goes through one path, `Store::retrying` (the transfer
//! operations through `Store::write` on top of it, the conversation domain through its
//! `admitted` wrapper): one transaction begun by `Store::begin` that, when SQLite reports the database busy or locked (another
//! process holds the write lock past [`BUSY_TIMEOUT`], or a lock could not be taken at all),
//! is rolled back and run again from the start, at most [`MAX_WRITE_ATTEMPTS`] times with
//! growing pauses ([`MAX_SERIALIZABLE_WRITE_ATTEMPTS`] on PostgreSQL, whose serialization
//! failures come at once). A rolled-back attempt changed nothing — no token consumed, no transfer
//! moved — so retrying is always safe; when every attempt finds the database busy the caller
//! gets [`Error::Busy`], which [`Error::is_transient`] tells apart from a refusal.
//!
//! Migrations are the files `store/sql/NNNN_*.sql` (and their PostgreSQL twins in
//! `store/sql/postgres/`), applied in order inside one write transaction and recorded in
//! `PRAGMA user_version` (on PostgreSQL, the table `ahp_schema_version`) (the pattern of Mozilla's
//! application-services). A database whose version is newer than this build knows is refused.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ahp_store_sql::{Begin, Connection, Dialect, SqlError, Transaction, Tx};
use rusqlite::OpenFlags;

use crate::clock::{Clock, SystemClock, Timestamp};
use crate::error::WriteError;
use crate::error::{Error, Result};
use crate::migrations;
use crate::sqlite::SqliteConnection;
use crate::token::TokenKey;

/// How long a connection waits for another writer before failing with `SQLITE_BUSY`.
///
/// Writers hold the lock for one short transaction; five seconds covers a deep queue of them
/// on a slow disk while still surfacing a wedged writer.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Most attempts the store's write path makes at one transaction while the database is busy.
/// With [`BUSY_TIMEOUT`] per attempt a wedged writer is reported after about 20 s; a transient
/// lock (a checkpoint, a second process's short write) is ridden out.
pub const MAX_WRITE_ATTEMPTS: u32 = 4;

/// Most attempts on PostgreSQL, where a busy database is a serialization failure (`40001`)
/// reported at once rather than after a busy wait: a run of them — two hosts handing an agent
/// over while posts arrive — is ridden out (four attempts, 210 ms of pauses, were once not enough
/// on a loaded 2-core machine; a post then failed as busy).
pub const MAX_SERIALIZABLE_WRITE_ATTEMPTS: u32 = 8;

/// Pause before the second attempt; each later pause is four times the one before, up to
/// [`MAX_WRITE_BACKOFF`] (10, 40, 160 ms on SQLite; then 640 ms each on PostgreSQL): long enough
/// for a competing writer's commit (one fsync), short next to the busy timeout.
pub const FIRST_WRITE_BACKOFF: Duration = Duration::from_millis(10);

/// Longest pause between two attempts.
pub const MAX_WRITE_BACKOFF: Duration = Duration::from_millis(640);

/// Prepared statements kept per connection. The store has about 80 distinct statements and a
/// turn of a sandbox cycles through a dozen of them; rusqlite's default of 16 evicted hot ones,
/// and re-parsing SQL was a measurable part of every transition (BENCHMARKS.md).
const STATEMENT_CACHE_CAPACITY: usize = 128;

/// The host id of a store nobody named: a single host on its own database.
pub const DEFAULT_HOST_ID: &str = "local";

/// A connection to ahp's system of record, with its clock and (optionally) the transfer-token key.
///
/// A `Store` is one database connection: `Send`, not `Sync`. Open one per thread, or funnel
/// writes through one owner; the database serializes writers either way.
pub struct Store {
    pub(crate) conn: Box<dyn Connection>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) token_key: Option<TokenKey>,
    /// Faults a test armed (`crate::fault`, with the `testing` feature); `None` unless one did.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) faults: Option<Arc<crate::fault_plan::FaultPlan>>,
    /// The host this store acts as ([`crate::hosts`]).
    pub(crate) host_id: String,
    /// The clock [`Store::sync_database_clock`] keeps in step with the database's, if any.
    database_clock: Option<Arc<crate::clock::OffsetClock>>,
    /// Whatever must live exactly as long as this store's connection (a test database).
    #[cfg(any(test, feature = "testing"))]
    keep_alive: Option<Box<dyn std::any::Any + Send>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dialect", &self.conn.dialect())
            .field("token_key", &self.token_key.is_some())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and migrates it to the current
    /// schema.
    ///
    /// # Errors
    ///
    /// [`Error::SchemaTooNew`] if the file was written by a newer ahp; [`Error::Database`] if it
    /// cannot be opened or is not a database.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::setup_sqlite(open_wal_file(path.as_ref())?)
    }

    /// Opens the SQLite database at `path` as one of the connections whose commits `group`
    /// makes durable (`synchronous=NORMAL`, the group's fsync before each commit returns; see
    /// [`crate::group_commit`]). [`StorePool::open`](crate::StorePool::open) is the way in.
    pub(crate) fn open_grouped(path: &Path, group: Arc<crate::group_commit::GroupCommit>) -> Result<Self> {
        let conn = open_wal_file(path)?;
        configure(&conn, "NORMAL")?;
        Self::over(Box::new(SqliteConnection::grouped(conn, group)))
    }

    /// A fresh private in-memory SQLite database, for tests.
    ///
    /// # Errors
    ///
    /// Only if SQLite itself fails.
    pub fn open_in_memory() -> Result<Self> {
        Self::setup_sqlite(rusqlite::Connection::open_in_memory().map_err(crate::sqlite::classify)?)
    }

    fn setup_sqlite(conn: rusqlite::Connection) -> Result<Self> {
        configure(&conn, "FULL")?;
        Self::over(Box::new(SqliteConnection::new(conn)))
    }

    /// A store over an already open backend connection. A SQLite connection is migrated to
    /// the current schema here; a PostgreSQL one must have been migrated by its backend crate
    /// (`ahp_store_postgres::open`).
    ///
    /// # Errors
    ///
    /// [`Error::SchemaTooNew`]; [`Error::SchemaBehind`] for an unmigrated PostgreSQL database;
    /// the backend's errors.
    pub fn over(conn: Box<dyn Connection>) -> Result<Self> {
        let mut store = Self {
            conn,
            clock: Arc::new(SystemClock),
            token_key: None,
            #[cfg(any(test, feature = "testing"))]
            faults: None,
            host_id: DEFAULT_HOST_ID.to_owned(),
            database_clock: None,
            #[cfg(any(test, feature = "testing"))]
            keep_alive: None,
        };
        store.migrate()?;
        Ok(store)
    }

    /// Waits at most `timeout` for another connection's write lock before an attempt counts as
    /// busy (default [`BUSY_TIMEOUT`]). Only SQLite has this setting; other backends ignore it.
    ///
    /// # Errors
    ///
    /// Only if SQLite refuses the setting.
    #[cfg(any(test, feature = "testing"))]
    pub fn with_busy_timeout(mut self, timeout: Duration) -> Result<Self> {
        if let Some(conn) = self.sqlite() {
            conn.busy_timeout(timeout).map_err(crate::sqlite::classify)?;
        }
        Ok(self)
    }

    /// Keeps `value` alive as long as this store (a test database that is dropped after its
    /// last connection).
    #[doc(hidden)]
    #[cfg(any(test, feature = "testing"))]
    pub fn keeping(mut self, value: Box<dyn std::any::Any + Send>) -> Self {
        self.keep_alive = Some(value);
        self
    }

    /// Uses `clock` for every timestamp and deadline from now on.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Follows the database's clock from now on (the system clock corrected by the offset
    /// [`sync_database_clock`](Self::sync_database_clock) measures; measured once here): hosts
    /// sharing one database then judge leases by one clock. On SQLite, whose database lives on
    /// this machine, the offset stays zero.
    ///
    /// # Errors
    ///
    /// The database's failure to tell its time.
    pub fn with_database_clock(self) -> Result<Self> {
        self.following_database_clock(Arc::new(crate::clock::OffsetClock::new()))
    }

    /// [`with_database_clock`](Self::with_database_clock) through `clock`, which other stores
    /// of the same host (a pool's sessions) follow as well: whichever of them measures the
    /// database's clock again corrects all of them.
    ///
    /// # Errors
    ///
    /// The database's failure to tell its time.
    pub fn following_database_clock(mut self, clock: Arc<crate::clock::OffsetClock>) -> Result<Self> {
        self.clock = clock.clone();
        self.database_clock = Some(clock);
        self.sync_database_clock()?;
        Ok(self)
    }

    /// Measures the database's clock again and returns the offset of the system clock from it
    /// (zero on SQLite, or when the store does not follow the database's clock).
    ///
    /// # Errors
    ///
    /// The database's failure to tell its time.
    pub fn sync_database_clock(&mut self) -> Result<Duration> {
        let Some(clock) = self.database_clock.clone() else {
            return Ok(Duration::ZERO);
        };
        if self.dialect() != Dialect::Postgres {
            return Ok(Duration::ZERO);
        }
        let before = SystemClock.now().as_micros();
        let database: i64 = self.autocommit().query_row(
            "SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000000) AS BIGINT)",
            [],
            |r| r.get(0),
        )?;
        let after = SystemClock.now().as_micros();
        let offset = database - (before + (after - before) / 2);
        clock.set_offset_micros(offset);
        Ok(Duration::from_micros(offset.unsigned_abs()))
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

    /// The SQL dialect of the backend under this store.
    pub fn dialect(&self) -> Dialect {
        self.conn.dialect()
    }

    /// The database's schema version: how many migrations have run.
    ///
    /// # Errors
    ///
    /// Only if the database fails.
    #[cfg(any(test, feature = "testing"))]
    pub fn schema_version(&mut self) -> Result<i64> {
        let dialect = self.dialect();
        let (tx, _) = self.begin(Begin::Read)?;
        Ok(read_version(&tx, dialect)?)
    }

    /// The newest schema version this build knows.
    pub fn supported_schema_version() -> i64 {
        migrations::SQLITE.len() as i64
    }

    /// The SQLite connection, bypassing every invariant: for diagnostics and tests only.
    ///
    /// # Panics
    ///
    /// On any other backend.
    #[doc(hidden)]
    #[cfg(any(test, feature = "testing"))]
    pub fn connection(&mut self) -> &mut rusqlite::Connection {
        self.sqlite().expect("Store::connection is the SQLite test seam")
    }

    /// The SQLite driver under this store, if that is its backend.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn sqlite(&mut self) -> Option<&mut rusqlite::Connection> {
        self.conn
            .as_any_mut()
            .downcast_mut::<SqliteConnection>()
            .map(SqliteConnection::raw)
    }

    /// Begins a transaction, then reads the clock (so a write's `now` is taken with the lock
    /// held). Every transaction of the store starts here; a [`Begin::Write`] one takes the
    /// write lock up front (SQLite `BEGIN IMMEDIATE`), so a writer waits on the busy timeout
    /// instead of failing on upgrade. Dropped uncommitted, it rolls back.
    pub(crate) fn begin(&mut self, begin: Begin) -> std::result::Result<(Transaction<'_>, Timestamp), SqlError> {
        let tx = Transaction::begin(self.conn.as_mut(), begin)?;
        Ok((tx, self.clock.now()))
    }

    /// Most attempts the write path makes at one transaction on this store's database:
    /// [`MAX_WRITE_ATTEMPTS`] on SQLite, [`MAX_SERIALIZABLE_WRITE_ATTEMPTS`] on PostgreSQL.
    pub fn max_write_attempts(&self) -> u32 {
        match self.dialect() {
            Dialect::Postgres => MAX_SERIALIZABLE_WRITE_ATTEMPTS,
            _ => MAX_WRITE_ATTEMPTS,
        }
    }

    /// The store's one write path: runs `op` — which begins, writes and commits one transaction
    /// through [`Store::begin`] — and when the database reports itself busy (at `BEGIN`, inside
    /// the transaction, or at `COMMIT`) runs it again from the start, up to
    /// [`max_write_attempts`](Self::max_write_attempts) times with growing pauses (see the
    /// module docs). A busy attempt
    /// was rolled back and changed nothing, so running it again is always safe.
    ///
    /// # Errors
    ///
    /// `op`'s error; after the last busy attempt, [`WriteError::exhausted`].
    pub(crate) fn retrying<T, E: WriteError>(
        &mut self,
        mut op: impl FnMut(&mut Self) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let mut backoff = FIRST_WRITE_BACKOFF;
        let mut attempt = 1;
        let max = self.max_write_attempts();
        loop {
            match op(self) {
                Err(e) if e.is_transient() && attempt < max => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 4).min(MAX_WRITE_BACKOFF);
                    attempt += 1;
                }
                Err(e) if e.is_transient() => return Err(e.exhausted(attempt)),
                other => return other,
            }
        }
    }

    /// One write transaction on the write path: `body` runs inside it, and it commits when
    /// `body` succeeds (rolls back when it fails).
    ///
    /// # Errors
    ///
    /// `body`'s error; [`Error::Busy`] when every attempt found the database busy.
    pub(crate) fn write<T>(&mut self, mut body: impl FnMut(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.retrying(|s| {
            let (tx, _) = s.begin(Begin::Write)?;
            let value = body(&tx)?;
            tx.commit()?;
            Ok(value)
        })
    }

    /// [`write`](Self::write), handing the body the transaction's time (read once the write
    /// lock is held).
    pub(crate) fn write_at<T>(&mut self, mut body: impl FnMut(&Tx<'_>, Timestamp) -> Result<T>) -> Result<T> {
        self.retrying(|s| {
            let (tx, now) = s.begin(Begin::Write)?;
            let value = body(&tx, now)?;
            tx.commit()?;
            Ok(value)
        })
    }

    /// Statements outside any transaction, each committed (or read) on its own: for a single
    /// read, or a single-statement write that needs no read-check before it.
    pub(crate) fn autocommit(&mut self) -> Tx<'_> {
        Tx::new(self.conn.as_mut())
    }

    fn migrate(&mut self) -> Result<()> {
        let dialect = self.dialect();
        let supported = Self::supported_schema_version();
        self.retrying(|s| {
            let (tx, _) = s.begin(Begin::Write)?;
            let found = read_version(&tx, dialect)?;
            if found > supported {
                return Err(Error::SchemaTooNew { found, supported });
            }
            if found == supported {
                return Ok(());
            }
            if dialect == Dialect::Postgres {
                // Its migrations run in its backend crate, under a lock hosts share.
                return Err(Error::SchemaBehind { found, supported });
            }
            for sql in &migrations::SQLITE[usize::try_from(found).unwrap_or(0)..] {
                tx.execute_batch(sql)?;
            }
            tx.execute_batch(&format!("PRAGMA user_version = {supported}"))?;
            tx.commit()?;
            Ok(())
        })
    }
}

/// Sets what every store connection to SQLite runs with: the statement cache, foreign keys,
/// and `synchronous` (`FULL` for a connection that commits alone, `NORMAL` for one whose
/// commits a group commit's fsync makes durable).
fn configure(conn: &rusqlite::Connection, synchronous: &str) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    let set = |name, value| conn.pragma_update(None, name, value).map_err(crate::sqlite::classify);
    set("foreign_keys", "ON")?;
    set("synchronous", synchronous)?;
    Ok(())
}

/// A connection to the SQLite file at `path` (created if missing) in WAL mode, with the store's
/// busy timeout.
fn open_wal_file(path: &Path) -> Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(crate::sqlite::classify)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(crate::sqlite::classify)?;
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
        .map_err(crate::sqlite::classify)?;
    Ok(conn)
}

/// The refusal of unique index `index` to a row that a concurrent transaction inserted after
/// this one read (PostgreSQL), as the conflict it is: [`SqlError::Busy`], so the write path
/// runs the whole transaction again, which then sees that row (and coalesces into it, or takes
/// the next number). For an insert whose transaction first read that the row was absent (the
/// agent's open wake, the conversation's next seq). PostgreSQL reports such a race as a unique
/// violation rather than a serialization failure unless the read went through that same index
/// (its documentation advises retrying `23505` in serializable transactions for this reason).
/// Under SQLite's write lock the read is authoritative, so there the error is left as it is
/// (its message names the columns, not the index).
pub(crate) fn raced_insert(index: &'static str) -> impl Fn(SqlError) -> SqlError {
    move |e| match e {
        SqlError::Constraint(m) if m.strip_prefix(index).is_some_and(|rest| rest.starts_with(':')) => SqlError::Busy(m),
        e => e,
    }
}

fn read_version(tx: &Tx<'_>, dialect: Dialect) -> std::result::Result<i64, SqlError> {
    match dialect {
        Dialect::Sqlite => tx.query_row("PRAGMA user_version", (), |r| r.get(0)),
        Dialect::Postgres => {
            let table: Option<String> =
                tx.query_row("SELECT CAST(to_regclass('ahp_schema_version') AS TEXT)", (), |r| {
                    r.get(0)
                })?;
            if table.is_none() {
                return Ok(0);
            }
            Ok(tx
                .query_row("SELECT max(version) FROM ahp_schema_version", (), |r| {
                    r.get::<_, Option<i64>>(0)
                })?
                .unwrap_or(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrations::SQLITE as MIGRATIONS;
    use rusqlite::Connection;

    #[test]
    fn opens_migrates_and_reopens_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ahp.db");
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), Store::supported_schema_version());
        let mode: String = store
            .connection()
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let sync: i64 = store
            .connection()
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap();
        assert_eq!(sync, 2, "synchronous=FULL");
        let fk: i64 = store
            .connection()
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
        drop(store);
        let mut again = Store::open(&path).unwrap();
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
    fn a_postgres_database_is_used_only_at_this_builds_schema() {
        let Some((url, _db)) = ahp_store_postgres::testing::fresh_database() else {
            return;
        };
        // Not migrated: refused (the store never migrates a PostgreSQL database itself).
        let conn = ahp_store_postgres::PgConnection::connect(&url).unwrap();
        let err = Store::over(Box::new(conn)).unwrap_err();
        assert!(
            matches!(err, Error::SchemaBehind { found: 0, supported } if supported == Store::supported_schema_version()),
            "{err}"
        );
        // One migration short: refused.
        let mut conn = ahp_store_postgres::PgConnection::connect(&url).unwrap();
        ahp_store_postgres::migrate_to(&mut conn, Store::supported_schema_version() - 1).unwrap();
        let err = Store::over(Box::new(conn)).unwrap_err();
        assert!(matches!(err, Error::SchemaBehind { .. }), "{err}");
        // Migrated: opens, at the supported version.
        let mut store = Store::over(Box::new(ahp_store_postgres::open(&url).unwrap())).unwrap();
        assert_eq!(store.schema_version().unwrap(), Store::supported_schema_version());
        assert_eq!(store.dialect(), Dialect::Postgres);
        // Written by a newer build: refused.
        let mut conn = ahp_store_postgres::PgConnection::connect(&url).unwrap();
        ahp_store_postgres::set_schema_version(&mut conn, 999).unwrap();
        let err = Store::over(Box::new(conn)).unwrap_err();
        assert!(matches!(err, Error::SchemaTooNew { found: 999, .. }), "{err}");
    }

    #[test]
    fn only_the_named_unique_index_reads_as_a_race() {
        let raced = raced_insert("wakes_one_open");
        let pg = |m: &str| {
            SqlError::Constraint(format!(
                "{m}: duplicate key value violates unique constraint [SQLSTATE 23505]"
            ))
        };
        assert!(matches!(raced(pg("wakes_one_open")), SqlError::Busy(m) if m.contains("23505")));
        assert!(matches!(raced(pg("wakes_one_open_by_agent")), SqlError::Constraint(_)));
        assert!(matches!(
            raced(pg("deliveries_message_id_recipient_agent_id_key")),
            SqlError::Constraint(_)
        ));
        // SQLite's message names the columns: left as it is.
        let sqlite = SqlError::Constraint("UNIQUE constraint failed: wakes.agent_id".into());
        assert!(matches!(raced(sqlite), SqlError::Constraint(_)));
        assert!(matches!(
            raced(SqlError::Backend("wakes_one_open: lost".into())),
            SqlError::Backend(_)
        ));
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

    /// The write path runs a transaction again while the database is busy, up to the store's
    /// budget — eight attempts on PostgreSQL (serialization failures come at once), four on
    /// SQLite — and then reports how many it made; the pauses stay bounded.
    #[test]
    fn busy_attempts_are_bounded_by_the_backend_s_budget() {
        let mut s = crate::testing::store().unwrap();
        let max = s.max_write_attempts();
        let expected = match s.dialect() {
            Dialect::Postgres => MAX_SERIALIZABLE_WRITE_ATTEMPTS,
            _ => MAX_WRITE_ATTEMPTS,
        };
        assert_eq!(max, expected);
        let busy = || Err(Error::Busy { attempts: 0 });
        // Busy on all but the last attempt: it succeeds.
        let mut made = 0;
        let started = std::time::Instant::now();
        let r: Result<u32> = s.retrying(|_| {
            made += 1;
            if made < max { busy() } else { Ok(made) }
        });
        assert_eq!(r.unwrap(), max);
        // Busy on every attempt: reported with the count, after at most the capped pauses.
        made = 0;
        let r: Result<u32> = s.retrying(|_| {
            made += 1;
            busy()
        });
        assert!(matches!(r, Err(Error::Busy { attempts }) if attempts == max), "{r:?}");
        assert_eq!(made, max);
        let pauses: Duration = (0..max - 1)
            .map(|i| (FIRST_WRITE_BACKOFF * 4u32.pow(i)).min(MAX_WRITE_BACKOFF))
            .sum();
        assert!(
            started.elapsed() < pauses * 2 + Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
}
