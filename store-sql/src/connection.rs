//! The trait a database backend implements.

use std::any::Any;

use crate::error::SqlResult;
use crate::row::Row;
use crate::value::ValueRef;

/// How a transaction starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// A transaction that will write: it takes whatever lock or isolation makes its
    /// read-check-write sequence safe against concurrent writers (SQLite `BEGIN IMMEDIATE`,
    /// PostgreSQL `SERIALIZABLE`), so a conflict surfaces as [`SqlError::Busy`](crate::SqlError::Busy)
    /// and the whole transaction is retried, never a half-applied compare-and-set.
    Write,
    /// A transaction that only reads: its statements see one snapshot.
    Read,
}

/// Which SQL dialect a backend speaks, for the few statements that differ (migrations,
/// catalog queries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite 3.
    Sqlite,
    /// PostgreSQL 15 or later.
    Postgres,
}

/// One connection to a database. Statements use `?N` placeholders.
///
/// The store opens a transaction with [`begin`](Self::begin), runs statements, and ends it
/// with [`commit`](Self::commit) or [`rollback`](Self::rollback); it never nests them.
pub trait Connection: Send {
    /// The dialect this backend speaks.
    fn dialect(&self) -> Dialect;

    /// Starts a transaction.
    ///
    /// # Errors
    ///
    /// [`SqlError::Busy`](crate::SqlError::Busy) when the database cannot start it now.
    fn begin(&mut self, begin: Begin) -> SqlResult<()>;

    /// Commits the open transaction; when this returns `Ok` the transaction is durable.
    ///
    /// # Errors
    ///
    /// [`SqlError::Busy`](crate::SqlError::Busy) for a conflict found at commit (the
    /// transaction was rolled back).
    fn commit(&mut self) -> SqlResult<()>;

    /// Rolls the open transaction back (a no-op when none is open).
    ///
    /// # Errors
    ///
    /// Only if the backend fails.
    fn rollback(&mut self) -> SqlResult<()>;

    /// Runs one statement; returns the number of rows it changed.
    ///
    /// # Errors
    ///
    /// Whatever the database reports.
    fn execute(&mut self, sql: &str, params: &[ValueRef<'_>]) -> SqlResult<u64>;

    /// Runs one query, handing each row to `row` until it returns `false` or the rows end.
    ///
    /// # Errors
    ///
    /// Whatever the database reports, or `row`'s error.
    fn query(
        &mut self,
        sql: &str,
        params: &[ValueRef<'_>],
        row: &mut dyn FnMut(Row) -> SqlResult<bool>,
    ) -> SqlResult<()>;

    /// Runs several statements separated by `;`, without parameters (migrations).
    ///
    /// # Errors
    ///
    /// Whatever the database reports.
    fn execute_batch(&mut self, sql: &str) -> SqlResult<()>;

    /// The backend itself, for a test seam that needs its driver.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}
