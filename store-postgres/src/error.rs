//! How a PostgreSQL error becomes an [`SqlError`]: by SQLSTATE, so the store's retry loop and
//! its constraint checks behave the same on both backends.

use ahp_store_sql::SqlError;
use postgres::error::SqlState;

use crate::bind::BindError;

/// SQLSTATEs after which running the whole transaction again may succeed: a serialization
/// failure (`40001`), a deadlock (`40P01`) and a lock that could not be taken at once (`55P03`,
/// `NOWAIT` and `lock_timeout`).
const TRANSIENT: [SqlState; 3] = [
    SqlState::T_R_SERIALIZATION_FAILURE,
    SqlState::T_R_DEADLOCK_DETECTED,
    SqlState::LOCK_NOT_AVAILABLE,
];

/// Classifies `error`.
///
/// - a transient SQLSTATE (see [`TRANSIENT`]) → [`SqlError::Busy`];
/// - class `23` (integrity constraint violation: unique, foreign key, check, not null,
///   exclusion) → [`SqlError::Constraint`], naming the constraint;
/// - a parameter this crate could not encode for the type PostgreSQL inferred →
///   [`SqlError::Conversion`] (its `column` is the parameter's zero-based index);
/// - a lost or closed connection → [`SqlError::Backend`] (never `Busy`: whether the
///   transaction committed is unknown, so it must not be blindly retried);
/// - anything else → [`SqlError::Backend`] with the SQLSTATE and the server's message.
pub(crate) fn classify(error: &postgres::Error) -> SqlError {
    if let Some(db) = error.as_db_error() {
        let code = db.code();
        let text = match db.detail() {
            Some(detail) => format!("{} ({detail}) [SQLSTATE {}]", db.message(), code.code()),
            None => format!("{} [SQLSTATE {}]", db.message(), code.code()),
        };
        if TRANSIENT.contains(code) {
            return SqlError::Busy(text);
        }
        if code.code().starts_with("23") {
            return match db.constraint() {
                Some(name) => SqlError::Constraint(format!("{name}: {text}")),
                None => SqlError::Constraint(text),
            };
        }
        return SqlError::Backend(text);
    }
    if let Some(bind) = std::error::Error::source(error).and_then(|s| s.downcast_ref::<BindError>()) {
        return SqlError::conversion(bind.index, bind.to_string());
    }
    if error.is_closed() {
        return SqlError::Backend(format!("the PostgreSQL connection was lost: {error}"));
    }
    SqlError::Backend(format!("PostgreSQL: {error}"))
}
