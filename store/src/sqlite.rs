//! The embedded backend: [`ahp_store_sql::Connection`] over one rusqlite connection.
//!
//! Writes begin `IMMEDIATE` (the write lock up front, so a writer waits on the busy timeout
//! instead of failing on upgrade), reads `DEFERRED`. Every statement goes through rusqlite's
//! prepared-statement cache. SQLite's busy and locked results become
//! [`SqlError::Busy`]; constraint failures [`SqlError::Constraint`].
//!
//! A connection of a [`StorePool`](crate::StorePool) belongs to a [`GroupCommit`]: it takes the
//! group's write lock around each write, commits without an fsync, and returns from `COMMIT`
//! (and from the end of each read) only once the group has made the WAL durable past it (see
//! [`crate::group_commit`]).

use std::any::Any;
use std::sync::Arc;

use ahp_store_sql::{Begin, Connection, Dialect, Row, SqlError, SqlResult, Value, ValueRef};
use rusqlite::types::{ToSqlOutput, ValueRef as SqliteRef};

use crate::group_commit::GroupCommit;

/// One SQLite connection as a store backend.
#[derive(Debug)]
pub struct SqliteConnection {
    conn: rusqlite::Connection,
    /// The group this connection commits through, if it is one of a pool's.
    group: Option<Arc<GroupCommit>>,
    /// The group's write lock is held, with SQLite's change count when it was taken.
    writing: Option<u64>,
}

impl SqliteConnection {
    /// Wraps an open connection (pragmas already applied).
    pub(crate) fn new(conn: rusqlite::Connection) -> Self {
        Self {
            conn,
            group: None,
            writing: None,
        }
    }

    /// Wraps an open connection whose commits `group` makes durable (`synchronous=NORMAL`
    /// already applied).
    pub(crate) fn grouped(conn: rusqlite::Connection, group: Arc<GroupCommit>) -> Self {
        Self {
            conn,
            group: Some(group),
            writing: None,
        }
    }

    /// Takes the group's write lock (if in one) before a write.
    fn start_writing(&mut self) {
        if let Some(group) = &self.group {
            group.lock_writer();
            self.writing = Some(self.conn.total_changes());
        }
    }

    /// Releases the group's write lock after a write ended, and waits until what it committed
    /// (if anything) is durable.
    fn end_writing(&mut self, committed: bool) -> SqlResult<()> {
        let (Some(group), Some(changes_before)) = (&self.group, self.writing.take()) else {
            return Ok(());
        };
        let changed = committed && self.conn.total_changes() != changes_before;
        match group.unlock_writer(changed) {
            Some(number) => group.wait_durable(number),
            None => Ok(()),
        }
    }

    /// After a read: waits until everything it could have seen is durable.
    fn end_reading(&self) -> SqlResult<()> {
        match &self.group {
            Some(group) => group.wait_all_durable(),
            None => Ok(()),
        }
    }

    /// The driver's connection: for the SQLite-only test seams.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn raw(&mut self) -> &mut rusqlite::Connection {
        &mut self.conn
    }
}

/// A rusqlite error as the store sees it.
pub(crate) fn classify(e: rusqlite::Error) -> SqlError {
    match &e {
        rusqlite::Error::QueryReturnedNoRows => SqlError::NoRows,
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked => SqlError::Busy(e.to_string()),
            rusqlite::ErrorCode::ConstraintViolation => SqlError::Constraint(e.to_string()),
            _ => SqlError::Backend(e.to_string()),
        },
        _ => SqlError::Backend(e.to_string()),
    }
}

struct Bind<'a>(ValueRef<'a>);

impl rusqlite::ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            ValueRef::Null => SqliteRef::Null,
            ValueRef::Integer(i) => SqliteRef::Integer(i),
            ValueRef::Text(s) => SqliteRef::Text(s.as_bytes()),
            ValueRef::Blob(b) => SqliteRef::Blob(b),
        }))
    }
}

fn read(r: &rusqlite::Row<'_>, columns: usize) -> SqlResult<Row> {
    let mut values = Vec::with_capacity(columns);
    for i in 0..columns {
        values.push(match r.get_ref(i).map_err(classify)? {
            SqliteRef::Null => Value::Null,
            SqliteRef::Integer(n) => Value::Integer(n),
            SqliteRef::Real(x) => return Err(SqlError::conversion(i, format!("unexpected real {x}"))),
            SqliteRef::Text(t) => {
                Value::Text(String::from_utf8(t.to_vec()).map_err(|_| SqlError::conversion(i, "text is not UTF-8"))?)
            }
            SqliteRef::Blob(b) => Value::Blob(b.to_vec()),
        });
    }
    Ok(Row::new(values))
}

impl Connection for SqliteConnection {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn begin(&mut self, begin: Begin) -> SqlResult<()> {
        let sql = match begin {
            Begin::Write => {
                self.start_writing();
                "BEGIN IMMEDIATE"
            }
            Begin::Read => "BEGIN DEFERRED",
        };
        let begun = self.conn.execute_batch(sql).map_err(classify);
        if begun.is_err() {
            self.end_writing(false)?;
        }
        begun
    }

    fn commit(&mut self) -> SqlResult<()> {
        let committed = self.conn.execute_batch("COMMIT").map_err(classify);
        if committed.is_err() && !self.conn.is_autocommit() {
            // Still open: the caller rolls it back, which releases the write lock.
            return committed;
        }
        if self.writing.is_some() {
            self.end_writing(committed.is_ok())?;
        } else {
            self.end_reading()?;
        }
        committed
    }

    fn rollback(&mut self) -> SqlResult<()> {
        let rolled_back = if self.conn.is_autocommit() {
            Ok(())
        } else {
            self.conn.execute_batch("ROLLBACK").map_err(classify)
        };
        if self.writing.is_some() {
            self.end_writing(false)?;
        } else {
            // A read ends by being rolled back: it too waits for what it could have seen.
            self.end_reading()?;
        }
        rolled_back
    }

    fn execute(&mut self, sql: &str, params: &[ValueRef<'_>]) -> SqlResult<u64> {
        // A write outside any transaction commits on its own: through the group, like a
        // transaction's.
        let alone = self.group.is_some() && self.writing.is_none() && self.conn.is_autocommit();
        let stmt = self.conn.prepare_cached(sql).map_err(classify)?;
        let alone_write = alone && !stmt.readonly();
        drop(stmt);
        if alone_write {
            self.start_writing();
        }
        let mut stmt = self.conn.prepare_cached(sql).map_err(classify)?;
        let n = stmt
            .execute(rusqlite::params_from_iter(params.iter().map(|v| Bind(*v))))
            .map_err(classify);
        drop(stmt);
        if alone_write {
            self.end_writing(n.is_ok())?;
        } else if alone {
            self.end_reading()?;
        }
        Ok(n? as u64)
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[ValueRef<'_>],
        each: &mut dyn FnMut(Row) -> SqlResult<bool>,
    ) -> SqlResult<()> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(classify)?;
        let columns = stmt.column_count();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params.iter().map(|v| Bind(*v))))
            .map_err(classify)?;
        while let Some(r) = rows.next().map_err(classify)? {
            if !each(read(r, columns)?)? {
                break;
            }
        }
        drop(rows);
        drop(stmt);
        if self.conn.is_autocommit() {
            self.end_reading()?;
        }
        Ok(())
    }

    fn execute_batch(&mut self, sql: &str) -> SqlResult<()> {
        // Outside a transaction the batch may write and commits on its own: through the group.
        let alone = self.group.is_some() && self.writing.is_none() && self.conn.is_autocommit();
        if alone {
            self.start_writing();
        }
        let ran = self.conn.execute_batch(sql).map_err(classify);
        if alone {
            self.end_writing(ran.is_ok() && self.conn.is_autocommit())?;
        }
        ran
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
