//! The one error a backend reports, classified by what the caller can do about it.

/// A result whose error is a [`SqlError`].
pub type SqlResult<T> = Result<T, SqlError>;

/// What went wrong talking to the database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqlError {
    /// A query expected to return a row returned none.
    #[error("query returned no rows")]
    NoRows,
    /// The database could not run the transaction now (SQLite busy or locked; PostgreSQL
    /// serialization failure or deadlock). Nothing was committed: running the whole
    /// transaction again is safe.
    #[error("the database is busy: {0}")]
    Busy(String),
    /// A constraint (unique, foreign key, check, not null) refused a write.
    #[error("constraint violated: {0}")]
    Constraint(String),
    /// A column's value could not be read as the type asked for.
    #[error("column {column}: {message}")]
    Conversion {
        /// Zero-based column index.
        column: usize,
        /// What was found instead.
        message: String,
    },
    /// Any other failure of the backend (I/O, a malformed statement, a lost connection).
    #[error("{0}")]
    Backend(String),
}

impl SqlError {
    /// True when the transaction failed only because of contention and may be run again.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Busy(_))
    }

    /// A conversion error for `column`.
    pub fn conversion(column: usize, message: impl Into<String>) -> Self {
        Self::Conversion {
            column,
            message: message.into(),
        }
    }
}
