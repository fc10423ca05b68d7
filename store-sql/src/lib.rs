//! `ahp-store-sql` — the seam between ahp's store and the database under it.
//!
//! The store's domain code is written once, against this crate: it runs statements through a
//! [`Tx`] (a transaction some backend opened), binds [`ToValue`]s, reads [`Row`]s of
//! [`Value`]s and sees one error type, [`SqlError`], whose [`SqlError::is_transient`] says
//! "run the whole transaction again". A backend is a [`Connection`]: SQLite (in `ahp-store`)
//! and PostgreSQL (`ahp-store-postgres`) each implement it, so neither the store's public API
//! nor its domain code names a driver type.
//!
//! The SQL itself is the portable subset both databases run the same way, with placeholders
//! written `?1`, `?2`, … (SQLite's numbered form; a backend that numbers them otherwise
//! rewrites them, see [`placeholders::numbered_to_dollar`]).

pub mod connection;
pub mod error;
pub mod placeholders;
pub mod row;
pub mod tx;
pub mod value;

pub use connection::{Begin, Connection, Dialect};
pub use error::{SqlError, SqlResult};
pub use row::{Row, RowIndex};
pub use tx::{MappedRows, OptionalExtension, Statement, Transaction, Tx};
pub use value::{FromValue, Params, ToValue, Value, ValueRef};
