//! [`PgConnection`]: one PostgreSQL session speaking the store's `?N` SQL.

use std::any::Any;
use std::collections::HashMap;

use ahp_store_sql::placeholders::numbered_to_dollar;
use ahp_store_sql::{Begin, Connection, Dialect, Row, SqlError, SqlResult, ValueRef};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{ToSql, Type};
use postgres::{Client, NoTls, Statement};

use crate::bind::Param;
use crate::decode::Decoded;
use crate::error::classify;

/// How many prepared statements one connection keeps. The store's SQL is a fixed set of
/// texts (a few hundred at most), so in steady state every statement is prepared once; the
/// bound keeps a caller that builds SQL dynamically from growing the server's and the
/// client's memory without limit. When it is reached the cache starts over.
pub const STATEMENT_CACHE_CAPACITY: usize = 512;

/// `BEGIN` for [`Begin::Write`]: serializable, so a read-check-write transaction that raced
/// another fails with `40001` (→ [`SqlError::Busy`], retry the whole transaction) instead of
/// committing a lost update.
const BEGIN_WRITE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE";

/// `BEGIN` for [`Begin::Read`]: one snapshot for every statement, read-only. Repeatable read
/// rather than `SERIALIZABLE READ ONLY DEFERRABLE`: a deferrable transaction may wait at its
/// first statement, for as long as concurrent serializable writers run, for a snapshot that
/// is safe, and a non-deferrable serializable reader can itself fail with `40001`; a
/// repeatable-read reader never waits and never fails for contention. What it gives up is
/// the read-only anomaly (it may see a state no serial order of the writers produces); the
/// store's reads are views for people and for the next write's own checks, which run again
/// inside the serializable write.
///
/// Measured here (PostgreSQL 15, 2 vCPU, pgbench 8 s: 4 serializable writers updating random
/// rows of 1,000 after reading a range, beside 4 readers summing the table and reading a row):
/// repeatable read read-only 5,090 reader tx/s at 0.79 ms, none failed; serializable read-only
/// deferrable 1,257 tx/s at 3.18 ms (4x slower, waiting for safe snapshots); serializable
/// read-only 3,475 tx/s with 40 % of them failing with `40001`. The writers ran ~1,400 tx/s in
/// all three.
const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";

/// One connection to PostgreSQL, implementing the store's [`Connection`].
///
/// Statements are written with `?N` placeholders; each distinct text is rewritten to `$N`
/// and prepared once per connection (see [`STATEMENT_CACHE_CAPACITY`]). Parameters are
/// encoded by the type PostgreSQL inferred for each placeholder, and columns decoded by
/// their type (see the crate's `bind` and `decode` modules): integers, booleans (as 0/1),
/// integral `NUMERIC`s, text and bytes.
///
/// A session the server dropped is reopened at the next [`begin`](Connection::begin), never
/// inside a transaction (there the statement that found it lost fails with
/// [`SqlError::Backend`]). A prepared statement that another session's schema change made
/// stale is dropped and reported as [`SqlError::Busy`], so the retried transaction prepares
/// it again. Text containing U+0000 is refused ([`SqlError::Conversion`]): PostgreSQL cannot
/// store it, where SQLite can.
///
/// The driver runs its own tokio runtime: never call a `PgConnection` from a tokio worker
/// thread (it panics); use a blocking thread.
pub struct PgConnection {
    url: String,
    client: Client,
    statements: HashMap<String, Statement>,
    /// A transaction is open: a failed prepare would abort it, so one runs in a savepoint.
    in_transaction: bool,
}

impl std::fmt::Debug for PgConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConnection")
            .field("cached_statements", &self.statements.len())
            .finish_non_exhaustive()
    }
}

/// The SQLSTATE (feature not supported) of "cached plan must not change result type".
const STALE_PLAN: &str = "0A000";

/// How long the server lets a session sit inside a transaction without a statement before it
/// ends the session: a host stopped mid-transaction (a `SIGSTOP`, a partition) cannot hold its
/// row locks — and so stall the host taking over its agents — for longer. The store's
/// transactions never wait on anything but their own statements.
pub const IDLE_IN_TRANSACTION_TIMEOUT: &str = "5s";

/// The longest a statement waits for a lock another session holds before its transaction is
/// retried as busy (`55P03`), so no host stalls behind a stopped one either.
pub const LOCK_TIMEOUT: &str = "2s";

fn open(url: &str) -> SqlResult<Client> {
    let mut client =
        Client::connect(url, NoTls).map_err(|e| SqlError::Backend(format!("connecting to PostgreSQL: {e}")))?;
    client
        .batch_execute(&format!(
            "SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_TIMEOUT}'; SET lock_timeout = '{LOCK_TIMEOUT}'"
        ))
        .map_err(|e| classify(&e))?;
    Ok(client)
}

/// The SQLSTATEs of "could not determine data type of parameter $N": `42P18`
/// (indeterminate datatype, `SELECT 1 WHERE ?1 IS NULL`) and `42P08` (ambiguous parameter,
/// `?1 IS NULL OR col = ?1`: the first use left it unknown).
const INDETERMINATE_DATATYPE: [&str; 2] = ["42P18", "42P08"];

impl PgConnection {
    /// Connects to `url`, a libpq connection string or URL
    /// (`postgres://user@host:port/database`, `host=/run/postgresql dbname=ahp`). No TLS: run
    /// the database on the same host or a private network, or put TLS in front of it.
    ///
    /// # Errors
    ///
    /// [`SqlError::Backend`] when the URL is malformed or the server cannot be reached.
    pub fn connect(url: &str) -> SqlResult<Self> {
        Ok(Self {
            url: url.to_owned(),
            client: open(url)?,
            statements: HashMap::new(),
            in_transaction: false,
        })
    }

    /// Reopens the session when the server closed it (a restart, a terminated backend, a
    /// network cut). Only called where no transaction is open: inside one, the statement that
    /// finds the connection lost fails with [`SqlError::Backend`] and nothing is redone.
    fn reopen_if_lost(&mut self) -> SqlResult<()> {
        if self.client.is_closed() {
            self.client = open(&self.url)?;
            self.statements.clear();
        }
        Ok(())
    }

    /// Classifies a statement's error; a prepared statement that another session's schema
    /// change made stale ("cached plan must not change result type") is dropped from the
    /// cache and reported as [`SqlError::Busy`]: its transaction is aborted, and running it
    /// again prepares the statement anew.
    fn failed(&mut self, sql: &str, error: &postgres::Error) -> SqlError {
        if let Some(db) = error.as_db_error()
            && db.code().code() == STALE_PLAN
            && db.message().contains("cached plan")
        {
            self.statements.remove(sql);
            return SqlError::Busy(format!("{} [SQLSTATE {STALE_PLAN}]", db.message()));
        }
        classify(error)
    }

    /// The driver's client, for tests and tools that need PostgreSQL itself.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// How many prepared statements the connection holds now.
    pub fn cached_statements(&self) -> usize {
        self.statements.len()
    }

    /// The prepared form of `sql` (`?N` placeholders), preparing it on first use.
    ///
    /// PostgreSQL infers each placeholder's type from where it stands. One that stands only
    /// where any type fits (`?1 IS NULL`) cannot be inferred; such a statement is prepared
    /// again with that placeholder typed by the value bound to it this time (integer →
    /// `int8`, text or null → `text`, blob → `bytea`), placeholder by placeholder.
    fn statement(&mut self, sql: &str, params: &[ValueRef<'_>]) -> SqlResult<Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let text = numbered_to_dollar(sql);
        let mut types: Vec<Type> = Vec::new();
        let statement = loop {
            match self.prepare_typed(&text, &types) {
                Ok(statement) => break statement,
                Err(e) => {
                    let Some(n) = indeterminate_parameter(&e) else {
                        return Err(classify(&e));
                    };
                    if n == 0 || n > params.len() || types.get(n - 1).is_some_and(|t| *t != Type::UNKNOWN) {
                        return Err(classify(&e));
                    }
                    if types.len() < n {
                        types.resize(n, Type::UNKNOWN);
                    }
                    types[n - 1] = match params[n - 1] {
                        ValueRef::Integer(_) => Type::INT8,
                        ValueRef::Blob(_) => Type::BYTEA,
                        ValueRef::Text(_) | ValueRef::Null => Type::TEXT,
                    };
                }
            }
        };
        if self.statements.len() >= STATEMENT_CACHE_CAPACITY {
            self.statements.clear();
        }
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Prepares `text`; inside a transaction in a savepoint, so that a failed attempt (an
    /// untyped placeholder, tried again typed) leaves the transaction usable.
    fn prepare_typed(&mut self, text: &str, types: &[Type]) -> Result<Statement, postgres::Error> {
        if !self.in_transaction {
            return self.client.prepare_typed(text, types);
        }
        self.client.batch_execute("SAVEPOINT ahp_prepare")?;
        match self.client.prepare_typed(text, types) {
            Ok(statement) => {
                self.client.batch_execute("RELEASE SAVEPOINT ahp_prepare")?;
                Ok(statement)
            }
            Err(e) => {
                self.client.batch_execute("ROLLBACK TO SAVEPOINT ahp_prepare")?;
                Err(e)
            }
        }
    }

    fn run_simple(&mut self, sql: &str) -> SqlResult<()> {
        self.client.batch_execute(sql).map_err(|e| classify(&e))
    }
}

/// The `N` of PostgreSQL's "could not determine data type of parameter $N".
fn indeterminate_parameter(e: &postgres::Error) -> Option<usize> {
    let db = e.as_db_error()?;
    if !INDETERMINATE_DATATYPE.contains(&db.code().code()) {
        return None;
    }
    db.message().rsplit('$').next()?.trim().parse().ok()
}

/// Why streaming a query's rows stopped early.
enum Failure {
    /// The driver's error, classified by the caller (which may evict a stale statement).
    Driver(postgres::Error),
    /// A decoding error, or the row callback's own.
    Sql(SqlError),
}

/// Runs `statement` and hands its rows, decoded, to `row` until it returns `false`.
fn stream(
    client: &mut Client,
    statement: &Statement,
    bound: &[Param<'_>],
    row: &mut dyn FnMut(Row) -> SqlResult<bool>,
) -> Result<(), Failure> {
    let mut rows = client.query_raw(statement, bound.iter()).map_err(Failure::Driver)?;
    while let Some(r) = rows.next().map_err(Failure::Driver)? {
        let mut values = Vec::with_capacity(r.len());
        for i in 0..r.len() {
            let Decoded(value) = r
                .try_get(i)
                .map_err(|e| Failure::Sql(SqlError::conversion(i, e.to_string())))?;
            values.push(value.map_err(|message| Failure::Sql(SqlError::conversion(i, message)))?);
        }
        if !row(Row::new(values)).map_err(Failure::Sql)? {
            // Dropping the iterator discards the rest of the result; the connection stays
            // usable for the next statement.
            break;
        }
    }
    Ok(())
}

fn bind<'a>(params: &'a [ValueRef<'a>]) -> Vec<Param<'a>> {
    params
        .iter()
        .enumerate()
        .map(|(index, value)| Param { index, value: *value })
        .collect()
}

fn check_arity(statement: &Statement, params: &[ValueRef<'_>]) -> SqlResult<()> {
    let wanted = statement.params().len();
    if wanted == params.len() {
        Ok(())
    } else {
        Err(SqlError::Backend(format!(
            "the statement has {wanted} placeholders but {} parameters were bound",
            params.len()
        )))
    }
}

impl PgConnection {
    fn begin_here(&mut self, begin: Begin) -> SqlResult<()> {
        let sql = match begin {
            Begin::Write => BEGIN_WRITE,
            Begin::Read => BEGIN_READ,
        };
        self.reopen_if_lost()?;
        let begun = match self.client.batch_execute(sql) {
            Ok(()) => Ok(()),
            // The server closed the session, and the driver had not noticed yet: no
            // transaction was open, so a new session may begin it.
            Err(e) if e.as_db_error().is_none() => {
                self.client = open(&self.url)?;
                self.statements.clear();
                self.run_simple(sql)
            }
            Err(e) => Err(classify(&e)),
        };
        self.in_transaction = begun.is_ok();
        begun
    }

    fn commit_here(&mut self) -> SqlResult<()> {
        self.in_transaction = false;
        self.run_simple("COMMIT")
    }

    fn rollback_here(&mut self) -> SqlResult<()> {
        self.in_transaction = false;
        // Outside a transaction PostgreSQL warns and does nothing, as the trait asks.
        self.run_simple("ROLLBACK")
    }

    fn execute_here(&mut self, sql: &str, params: &[ValueRef<'_>]) -> SqlResult<u64> {
        let statement = self.statement(sql, params)?;
        check_arity(&statement, params)?;
        let bound = bind(params);
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        self.client.execute(&statement, &refs).map_err(|e| self.failed(sql, &e))
    }

    fn query_here(
        &mut self,
        sql: &str,
        params: &[ValueRef<'_>],
        row: &mut dyn FnMut(Row) -> SqlResult<bool>,
    ) -> SqlResult<()> {
        let statement = self.statement(sql, params)?;
        check_arity(&statement, params)?;
        let bound = bind(params);
        match stream(&mut self.client, &statement, &bound, row) {
            Ok(()) => Ok(()),
            Err(Failure::Driver(e)) => Err(self.failed(sql, &e)),
            Err(Failure::Sql(e)) => Err(e),
        }
    }

    fn execute_batch_here(&mut self, sql: &str) -> SqlResult<()> {
        // A batch may change the schema (migrations): statements prepared before it could
        // then fail ("cached plan must not change result type"), so they are prepared anew.
        self.statements.clear();
        self.run_simple(sql)
    }
}

/// Runs `f` with `conn` on this thread, or — inside a tokio runtime's context (a sandbox's host
/// call runs inside `Handle::block_on`), where the driver may not start its own runtime — on a
/// scoped thread of its own, which borrows the connection for the call. The hop costs a
/// thread start; calls from plain threads pay nothing.
fn off_runtime<T: Send>(conn: &mut PgConnection, f: impl FnOnce(&mut PgConnection) -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f(conn);
    }
    std::thread::scope(|scope| match scope.spawn(|| f(conn)).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

impl Connection for PgConnection {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn begin(&mut self, begin: Begin) -> SqlResult<()> {
        off_runtime(self, |c| c.begin_here(begin))
    }

    fn commit(&mut self) -> SqlResult<()> {
        off_runtime(self, Self::commit_here)
    }

    fn rollback(&mut self) -> SqlResult<()> {
        off_runtime(self, Self::rollback_here)
    }

    fn execute(&mut self, sql: &str, params: &[ValueRef<'_>]) -> SqlResult<u64> {
        off_runtime(self, |c| c.execute_here(sql, params))
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[ValueRef<'_>],
        row: &mut dyn FnMut(Row) -> SqlResult<bool>,
    ) -> SqlResult<()> {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.query_here(sql, params, row);
        }
        // The rows cross back to this thread whole (queries are bounded by their LIMIT).
        let rows = off_runtime(self, |c| {
            let mut rows = Vec::new();
            c.query_here(sql, params, &mut |r| {
                rows.push(r);
                Ok(true)
            })
            .map(|()| rows)
        })?;
        for r in rows {
            if !row(r)? {
                break;
            }
        }
        Ok(())
    }

    fn execute_batch(&mut self, sql: &str) -> SqlResult<()> {
        off_runtime(self, |c| c.execute_batch_here(sql))
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
