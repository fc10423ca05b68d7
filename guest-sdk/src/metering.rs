//! The transfer's budget, and spend the host cannot see.
//!
//! CPU is metered for you: every instruction the agent runs is charged at the tier's rate, and
//! so are model calls ([`model`](crate::model), kind `model_tokens`) and MCP tool calls
//! ([`tools`](crate::tools)). Report only spend the host cannot see, such as a paid API
//! reached over `wasi:http`.
//!
//! ```no_run
//! use ahp_guest::metering::{self, Error};
//!
//! match metering::report("search_api", 1_200) {
//!     Ok(budget) => println!("{} micro-USD left", budget.remaining_micro_usd),
//!     Err(Error::Insolvent) => { /* the budget is spent: wrap up and return */ }
//!     Err(e) => eprintln!("report refused: {e}"),
//! }
//! ```

use crate::wit::ahp::agent::metering as raw;

pub use raw::BudgetState as Budget;

/// Why a report was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The kind is empty, too long, not `a-z 0-9 _`, or one the host meters itself
    /// (`compute`, `model_tokens`, `tool_calls`).
    InvalidKind(String),
    /// The amount is 0 or above the per-report maximum.
    InvalidAmount,
    /// The budget is spent; the agent should stop.
    Insolvent,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InvalidKind(why) => write!(f, "invalid usage kind: {why}"),
            Self::InvalidAmount => f.write_str("the amount must be 1 micro-USD to 1,000 USD"),
            Self::Insolvent => f.write_str("the budget is spent"),
        }
    }
}

impl std::error::Error for Error {}

/// Records `micro_usd` of spend of `kind` (for example `search_api`) and returns the budget
/// after it.
///
/// # Errors
///
/// [`Error::InvalidKind`], [`Error::InvalidAmount`], or [`Error::Insolvent`] once the budget
/// is spent.
pub fn report(kind: &str, micro_usd: u64) -> Result<Budget, Error> {
    raw::report(kind, micro_usd).map_err(|e| match e {
        raw::Error::InvalidKind(why) => Error::InvalidKind(why),
        raw::Error::InvalidAmount => Error::InvalidAmount,
        raw::Error::Insolvent => Error::Insolvent,
    })
}

/// The budget as it stands now, with the fuel left in this turn.
pub fn budget() -> Budget {
    raw::budget()
}
