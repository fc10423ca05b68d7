//! A backend-neutral picture of a database schema, read from PostgreSQL's catalog, for the
//! test that SQLite's and PostgreSQL's migrations build the same schema.
//!
//! Each field is normalized so that the same declaration reads the same on both backends
//! (the docs on each field say how). A SQLite reader builds the same [`Schema`] from
//! `PRAGMA table_info`, `index_list`, `index_info`, `foreign_key_list` and `sqlite_master`.

use std::collections::{BTreeMap, BTreeSet};

use ahp_store_sql::{Connection, Row, SqlResult};

/// Every table of a schema, by name.
///
/// On PostgreSQL: the base tables of the connection's `current_schema()`, without the
/// migration bookkeeping table `ahp_schema_version` (SQLite keeps its version in `PRAGMA
/// user_version`). On SQLite: `sqlite_master`'s tables without `sqlite_*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    /// Tables by name.
    pub tables: BTreeMap<String, Table>,
}

/// One table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Columns by name. Their order is **not** compared: PostgreSQL appends a column it adds,
    /// where SQLite's table rebuilds may place it elsewhere; the store names its columns in
    /// every statement.
    pub columns: BTreeMap<String, Column>,
    /// The primary key's columns, in key order (empty when there is none).
    pub primary_key: Vec<String>,
    /// Each `UNIQUE` constraint (column or table constraint, not a `CREATE UNIQUE INDEX`), as
    /// its columns in declared order.
    pub unique: BTreeSet<Vec<String>>,
    /// Each foreign key.
    pub foreign_keys: BTreeSet<ForeignKey>,
    /// The indexes made by `CREATE [UNIQUE] INDEX`, by name: not those PostgreSQL or SQLite
    /// make for a primary key or a `UNIQUE` constraint (those are above).
    pub indexes: BTreeMap<String, Index>,
    /// How many `CHECK` constraints the table has (column and table constraints). Only the
    /// count: each backend prints a check's expression its own way (PostgreSQL's
    /// `(wake_capable = ANY (ARRAY[(0)::bigint, (1)::bigint]))` for SQLite's
    /// `wake_capable IN (0, 1)`), so what they enforce is tested by writing rows. On SQLite:
    /// the `CHECK` keywords of the table's `sqlite_master.sql` outside comments and literals.
    pub checks: usize,
}

/// One column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The type, mapped to SQLite's storage names.
    pub ty: ColumnType,
    /// `NOT NULL`: declared so, or part of the primary key (PostgreSQL makes every key
    /// column not null; SQLite's rowid alias and STRICT tables' keys hold no null either).
    pub not_null: bool,
    /// The `DEFAULT` expression, normalized by [`normalize_expression`] (PostgreSQL writes
    /// `'host'::text` for SQLite's `'host'`), `None` when there is none.
    pub default: Option<String>,
    /// Assigned by the database when an insert leaves it out: a PostgreSQL identity column;
    /// on SQLite the single `INTEGER PRIMARY KEY` column of a rowid table (the rowid alias).
    pub identity: bool,
}

/// A column's type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ColumnType {
    /// PostgreSQL `bigint` (also `integer`, `smallint`); SQLite `INTEGER`.
    Integer,
    /// PostgreSQL `text`; SQLite `TEXT`.
    Text,
    /// PostgreSQL `bytea`; SQLite `BLOB`.
    Blob,
    /// Anything else, as the database names it (upper case): never equal across backends.
    Other(String),
}

/// A foreign key: these columns reference those of another table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ForeignKey {
    /// The referencing columns, in order.
    pub columns: Vec<String>,
    /// The referenced table.
    pub references: String,
    /// The referenced columns, in order.
    pub referenced_columns: Vec<String>,
}

/// An index made by `CREATE [UNIQUE] INDEX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// The indexed columns, in index order.
    pub columns: Vec<String>,
    /// `UNIQUE`.
    pub unique: bool,
    /// The partial index's `WHERE` predicate, normalized by [`normalize_predicate`].
    pub predicate: Option<String>,
}

impl ColumnType {
    /// The type a PostgreSQL `information_schema` `data_type` (or a SQLite declared type)
    /// maps to.
    pub fn from_declared(declared: &str) -> Self {
        match declared.trim().to_ascii_uppercase().as_str() {
            "BIGINT" | "INTEGER" | "SMALLINT" | "INT" | "INT8" | "INT4" | "INT2" => Self::Integer,
            "TEXT" => Self::Text,
            "BYTEA" | "BLOB" => Self::Blob,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// Reads the schema of `conn`'s current PostgreSQL schema (see [`Schema`]).
///
/// # Errors
///
/// The backend's error (or a conversion error if the catalog is not what PostgreSQL 15+ has).
pub fn schema(conn: &mut dyn Connection) -> SqlResult<Schema> {
    let mut schema = Schema::default();
    let rows = all(
        conn,
        "SELECT c.table_name::text, c.column_name::text, c.data_type::text, c.is_nullable::text,
                c.column_default::text, c.is_identity::text
         FROM information_schema.columns c
         JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
         WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
           AND c.table_name <> 'ahp_schema_version'",
    )?;
    for row in rows {
        let table: String = row.get(0)?;
        let default: Option<String> = row.get(4)?;
        schema.tables.entry(table).or_default().columns.insert(
            row.get(1)?,
            Column {
                ty: ColumnType::from_declared(&row.get::<_, String>(2)?),
                not_null: row.get::<_, String>(3)? == "NO",
                default: default.as_deref().map(normalize_expression),
                identity: row.get::<_, String>(5)? == "YES",
            },
        );
    }

    // Columns of a constraint or index, in order, comma-separated (no identifier of the
    // store's has a comma).
    let rows = all(
        conn,
        "SELECT cl.relname::text, con.contype::text,
                (SELECT string_agg(a.attname::text, ',' ORDER BY k.o)
                 FROM unnest(con.conkey) WITH ORDINALITY AS k(n, o)
                 JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n),
                ref.relname::text,
                (SELECT string_agg(a.attname::text, ',' ORDER BY k.o)
                 FROM unnest(con.confkey) WITH ORDINALITY AS k(n, o)
                 JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n)
         FROM pg_constraint con
         JOIN pg_class cl ON cl.oid = con.conrelid
         LEFT JOIN pg_class ref ON ref.oid = con.confrelid
         WHERE cl.relnamespace = current_schema()::regnamespace AND con.contype IN ('p', 'u', 'f')
           AND cl.relname <> 'ahp_schema_version'",
    )?;
    for row in rows {
        let table: String = row.get(0)?;
        let kind: String = row.get(1)?;
        let columns = split(&row.get::<_, String>(2)?);
        let entry = schema.tables.entry(table).or_default();
        match kind.as_str() {
            "p" => entry.primary_key = columns,
            "u" => {
                entry.unique.insert(columns);
            }
            _ => {
                entry.foreign_keys.insert(ForeignKey {
                    columns,
                    references: row.get(3)?,
                    referenced_columns: split(&row.get::<_, String>(4)?),
                });
            }
        }
    }
    for table in schema.tables.values_mut() {
        for key in &table.primary_key {
            if let Some(column) = table.columns.get_mut(key) {
                column.not_null = true;
            }
        }
    }

    let rows = all(
        conn,
        "SELECT cl.relname::text, COUNT(*)
         FROM pg_constraint con JOIN pg_class cl ON cl.oid = con.conrelid
         WHERE cl.relnamespace = current_schema()::regnamespace AND con.contype = 'c'
           AND cl.relname <> 'ahp_schema_version'
         GROUP BY cl.relname",
    )?;
    for row in rows {
        let table: String = row.get(0)?;
        schema.tables.entry(table).or_default().checks = row.get(1)?;
    }

    let rows = all(
        conn,
        "SELECT t.relname::text, ix.relname::text, i.indisunique,
                (SELECT string_agg(pg_get_indexdef(i.indexrelid, k, true), ',' ORDER BY k)
                 FROM generate_series(1, i.indnkeyatts::int) AS k),
                pg_get_expr(i.indpred, i.indrelid, true)
         FROM pg_index i
         JOIN pg_class ix ON ix.oid = i.indexrelid
         JOIN pg_class t ON t.oid = i.indrelid
         WHERE t.relnamespace = current_schema()::regnamespace AND t.relkind = 'r'
           AND t.relname <> 'ahp_schema_version'
           AND NOT EXISTS (SELECT 1 FROM pg_constraint con
                           WHERE con.conindid = i.indexrelid AND con.conrelid = i.indrelid
                             AND con.contype IN ('p', 'u', 'x'))",
    )?;
    for row in rows {
        let table: String = row.get(0)?;
        let predicate: Option<String> = row.get(4)?;
        schema.tables.entry(table).or_default().indexes.insert(
            row.get(1)?,
            Index {
                unique: row.get(2)?,
                columns: split(&row.get::<_, String>(3)?),
                predicate: predicate.as_deref().map(normalize_predicate),
            },
        );
    }
    Ok(schema)
}

fn all(conn: &mut dyn Connection, sql: &str) -> SqlResult<Vec<Row>> {
    let mut rows = Vec::new();
    conn.query(sql, &[], &mut |row| {
        rows.push(row);
        Ok(true)
    })?;
    Ok(rows)
}

fn split(list: &str) -> Vec<String> {
    list.split(',').map(|c| c.trim().trim_matches('"').to_owned()).collect()
}

/// A default expression as both backends read it: casts (`::text`, `::bigint`,
/// `::character varying`) outside string literals removed, redundant outer parentheses
/// removed, whitespace collapsed. `'host'::text` and `'host'` both read `'host'`; `(0)` and
/// `0` both read `0`.
pub fn normalize_expression(expression: &str) -> String {
    let mut out = String::new();
    let mut chars = expression.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                out.push(c);
                while let Some(d) = chars.next() {
                    out.push(d);
                    if d == '\'' {
                        if chars.peek() == Some(&'\'') {
                            out.push(chars.next().unwrap_or('\''));
                        } else {
                            break;
                        }
                    }
                }
            }
            ':' if chars.peek() == Some(&':') => {
                chars.next();
                // The type name: words and spaces up to a delimiter.
                while chars
                    .peek()
                    .is_some_and(|d| d.is_ascii_alphanumeric() || *d == '_' || *d == ' ')
                {
                    chars.next();
                }
            }
            c if c.is_whitespace() => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            _ => out.push(c),
        }
    }
    let mut text = out.trim().to_owned();
    while text.starts_with('(') && text.ends_with(')') && balanced(&text[1..text.len() - 1]) {
        text = text[1..text.len() - 1].trim().to_owned();
    }
    text
}

/// True when every parenthesis in `s` (outside literals) closes one opened before it.
fn balanced(s: &str) -> bool {
    let mut depth = 0_i32;
    let mut in_literal = false;
    for c in s.chars() {
        match c {
            '\'' => in_literal = !in_literal,
            '(' if !in_literal => depth += 1,
            ')' if !in_literal => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

pub use crate::predicate::normalize_predicate;
