//! [`Tx`]: the handle the store's domain code runs its statements through, inside a
//! transaction the store's write or read path opened.
//!
//! It mirrors the few calls the domain code makes (`prepare_cached(sql)?.execute(params)`,
//! `query_row`, `query_map`, `exists`), so the same code runs on every backend. Rows are
//! fetched whole before they are mapped, so a mapping closure may run further statements.

use std::cell::RefCell;

use crate::connection::{Begin, Connection};
use crate::error::{SqlError, SqlResult};
use crate::row::Row;
use crate::value::Params;

/// Statements inside one open transaction.
pub struct Tx<'c> {
    conn: RefCell<&'c mut dyn Connection>,
}

impl std::fmt::Debug for Tx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx").finish_non_exhaustive()
    }
}

impl<'c> Tx<'c> {
    /// A handle over `conn`, on which the caller has begun a transaction (and will end it).
    pub fn new(conn: &'c mut dyn Connection) -> Self {
        Self {
            conn: RefCell::new(conn),
        }
    }

    /// A statement to run (backends cache their prepared form by its text).
    ///
    /// # Errors
    ///
    /// Never; the `Result` keeps the shape of a driver's `prepare`, and a malformed statement
    /// is reported when it runs.
    pub fn prepare_cached<'s>(&'s self, sql: &'s str) -> SqlResult<Statement<'s, 'c>> {
        Ok(Statement { tx: self, sql })
    }

    /// Like [`prepare_cached`](Self::prepare_cached).
    ///
    /// # Errors
    ///
    /// Never.
    pub fn prepare<'s>(&'s self, sql: &'s str) -> SqlResult<Statement<'s, 'c>> {
        self.prepare_cached(sql)
    }

    /// Runs one statement; returns how many rows it changed.
    ///
    /// # Errors
    ///
    /// Whatever the backend reports.
    pub fn execute(&self, sql: &str, params: impl Params) -> SqlResult<usize> {
        let n = self.conn.borrow_mut().execute(sql, &params.values())?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Runs several `;`-separated statements without parameters.
    ///
    /// # Errors
    ///
    /// Whatever the backend reports.
    pub fn execute_batch(&self, sql: &str) -> SqlResult<()> {
        self.conn.borrow_mut().execute_batch(sql)
    }

    /// The first row of a query, mapped by `f`.
    ///
    /// # Errors
    ///
    /// [`SqlError::NoRows`] when there is none; the backend's or `f`'s error.
    pub fn query_row<T>(&self, sql: &str, params: impl Params, f: impl FnOnce(&Row) -> SqlResult<T>) -> SqlResult<T> {
        let row = self.first(sql, &params)?.ok_or(SqlError::NoRows)?;
        f(&row)
    }

    /// Every row of a query, in order.
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub fn rows(&self, sql: &str, params: &dyn Params) -> SqlResult<Vec<Row>> {
        let mut rows = Vec::new();
        self.conn.borrow_mut().query(sql, &params.values(), &mut |row| {
            rows.push(row);
            Ok(true)
        })?;
        Ok(rows)
    }

    fn first(&self, sql: &str, params: &dyn Params) -> SqlResult<Option<Row>> {
        let mut first = None;
        self.conn.borrow_mut().query(sql, &params.values(), &mut |row| {
            first = Some(row);
            Ok(false)
        })?;
        Ok(first)
    }

    /// The backend, for a test seam that needs its driver.
    pub fn with_connection<T>(&self, f: impl FnOnce(&mut dyn Connection) -> T) -> T {
        f(&mut **self.conn.borrow_mut())
    }
}

/// An open transaction that owns its end: [`commit`](Self::commit) makes it durable, dropping
/// it uncommitted rolls it back. It derefs to the [`Tx`] its statements run through.
pub struct Transaction<'c> {
    tx: Tx<'c>,
    open: bool,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction").field("open", &self.open).finish()
    }
}

impl<'c> Transaction<'c> {
    /// Begins a transaction on `conn`.
    ///
    /// # Errors
    ///
    /// The backend's, e.g. [`SqlError::Busy`] when it cannot start one now.
    pub fn begin(conn: &'c mut dyn Connection, begin: Begin) -> SqlResult<Self> {
        conn.begin(begin)?;
        Ok(Self {
            tx: Tx::new(conn),
            open: true,
        })
    }

    /// Commits; when this returns `Ok` the transaction is durable.
    ///
    /// # Errors
    ///
    /// The backend's (the transaction is then rolled back).
    pub fn commit(mut self) -> SqlResult<()> {
        self.open = false;
        let committed = self.tx.with_connection(|c| c.commit());
        if committed.is_err() {
            let _ = self.tx.with_connection(|c| c.rollback());
        }
        committed
    }
}

impl<'c> std::ops::Deref for Transaction<'c> {
    type Target = Tx<'c>;

    fn deref(&self) -> &Tx<'c> {
        &self.tx
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open {
            // Nothing was committed; a failed rollback leaves the backend to discard the
            // transaction when the connection next begins or closes.
            let _ = self.tx.with_connection(|c| c.rollback());
        }
    }
}

/// One statement of a [`Tx`], ready to run with parameters.
#[derive(Debug)]
pub struct Statement<'s, 'c> {
    tx: &'s Tx<'c>,
    sql: &'s str,
}

impl Statement<'_, '_> {
    /// Runs it; returns how many rows it changed.
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub fn execute(&mut self, params: impl Params) -> SqlResult<usize> {
        self.tx.execute(self.sql, params)
    }

    /// Its first row, mapped by `f`.
    ///
    /// # Errors
    ///
    /// [`SqlError::NoRows`] when there is none; the backend's or `f`'s error.
    pub fn query_row<T>(&mut self, params: impl Params, f: impl FnOnce(&Row) -> SqlResult<T>) -> SqlResult<T> {
        self.tx.query_row(self.sql, params, f)
    }

    /// Every row, each mapped by `f` as the iterator is read.
    ///
    /// # Errors
    ///
    /// The backend's error (a mapping error is the iterator's item).
    pub fn query_map<T, F: FnMut(&Row) -> SqlResult<T>>(
        &mut self,
        params: impl Params,
        f: F,
    ) -> SqlResult<MappedRows<F>> {
        let rows = self.tx.rows(self.sql, &params)?;
        Ok(MappedRows {
            rows: rows.into_iter(),
            f,
        })
    }

    /// Every row.
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub fn query(&mut self, params: impl Params) -> SqlResult<Vec<Row>> {
        self.tx.rows(self.sql, &params)
    }

    /// True when the query returns at least one row.
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub fn exists(&mut self, params: impl Params) -> SqlResult<bool> {
        Ok(self.tx.first(self.sql, &params)?.is_some())
    }
}

/// The rows of [`Statement::query_map`], each mapped as it is read.
pub struct MappedRows<F> {
    rows: std::vec::IntoIter<Row>,
    f: F,
}

impl<T, F: FnMut(&Row) -> SqlResult<T>> Iterator for MappedRows<F> {
    type Item = SqlResult<T>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rows.next().map(|r| (self.f)(&r))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.rows.size_hint()
    }
}

/// `.optional()` on a single-row result: no row becomes `None`.
pub trait OptionalExtension<T> {
    /// `Ok(None)` for [`SqlError::NoRows`], the value or other error otherwise.
    ///
    /// # Errors
    ///
    /// Any error but [`SqlError::NoRows`].
    fn optional(self) -> SqlResult<Option<T>>;
}

impl<T> OptionalExtension<T> for SqlResult<T> {
    fn optional(self) -> SqlResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(SqlError::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
