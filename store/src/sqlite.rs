//! The embedded backend: [`ahp_store_sql::Connection`] over one rusqlite connection.
//!
//! Writes begin `IMMEDIATE` (the write lock up front, so a writer waits on the busy timeout
//! instead of failing on upgrade), reads `DEFERRED`. Every statement goes through rusqlite's
//! prepared-statement cache. SQLite's busy and locked results become
//! [`SqlError::Busy`]; constraint failures [`SqlError::Constraint`].

use std::any::Any;

use ahp_store_sql::{Begin, Connection, Dialect, Row, SqlError, SqlResult, Value, ValueRef};
use rusqlite::types::{ToSqlOutput, ValueRef as SqliteRef};

/// One SQLite connection as a store backend.
#[derive(Debug)]
pub struct SqliteConnection {
    conn: rusqlite::Connection,
}

impl SqliteConnection {
    /// Wraps an open connection (pragmas already applied).
    pub(crate) fn new(conn: rusqlite::Connection) -> Self {
        Self { conn }
    }

    /// The driver's connection: for the SQLite-only test seams.
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
            Begin::Write => "BEGIN IMMEDIATE",
            Begin::Read => "BEGIN DEFERRED",
        };
        self.conn.execute_batch(sql).map_err(classify)
    }

    fn commit(&mut self) -> SqlResult<()> {
        self.conn.execute_batch("COMMIT").map_err(classify)
    }

    fn rollback(&mut self) -> SqlResult<()> {
        if self.conn.is_autocommit() {
            return Ok(());
        }
        self.conn.execute_batch("ROLLBACK").map_err(classify)
    }

    fn execute(&mut self, sql: &str, params: &[ValueRef<'_>]) -> SqlResult<u64> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(classify)?;
        let n = stmt
            .execute(rusqlite::params_from_iter(params.iter().map(|v| Bind(*v))))
            .map_err(classify)?;
        Ok(n as u64)
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
        Ok(())
    }

    fn execute_batch(&mut self, sql: &str) -> SqlResult<()> {
        self.conn.execute_batch(sql).map_err(classify)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
