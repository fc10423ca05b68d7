//! The session this agent continues, as the source host snapshotted it.
//!
//! Everything here is read-only and comes from the transfer's stored snapshot. The history can
//! be long (up to 10,000 messages), so [`messages`] fetches it lazily, one page at a time;
//! [`history`] reads all of it and checks that none is missing.
//!
//! ```no_run
//! use ahp_guest::snapshot;
//!
//! let prompt = snapshot::system_prompt();
//! let users = snapshot::messages().filter(|m| m.role == "user").count();
//! println!("{} resumes {users} user turns under {prompt:?}", snapshot::transfer_id());
//! ```

use crate::pages::{Next, Pages};
use crate::wit::ahp::agent::snapshot as raw;

pub use raw::{McpServer, Message};

/// The largest page [`messages_page`] accepts (the host's bound).
pub const MAX_PAGE: u32 = 256;

/// Why a snapshot read was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The page asked for is larger than the host serves; the payload is the largest allowed.
    LimitTooLarge(u32),
    /// The host served fewer messages than [`message_count`] says the history holds.
    Incomplete {
        /// The messages served.
        got: u32,
        /// The messages the history holds.
        expected: u32,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::LimitTooLarge(max) => write!(f, "a history page may hold at most {max} messages"),
            Self::Incomplete { got, expected } => {
                write!(f, "the history holds {expected} messages but {got} were served")
            }
        }
    }
}

impl std::error::Error for Error {}

/// The transfer this sandbox continues, e.g. `tr_…`.
pub fn transfer_id() -> String {
    raw::transfer_id()
}

/// The source session's system prompt.
pub fn system_prompt() -> String {
    raw::system_prompt()
}

/// How many messages the history holds.
pub fn message_count() -> u32 {
    raw::message_count()
}

/// Every message of the history, oldest first, fetched from the host [`MAX_PAGE`] at a time as
/// the iterator advances.
pub fn messages() -> Messages {
    // Positions count the messages served: a full page moves the cursor by its length, and a
    // short one (an empty one too) is the last.
    Messages(Pages::new(0, |&after, page| {
        let len = u32::try_from(page.len()).unwrap_or(u32::MAX);
        if len < MAX_PAGE {
            Next::Last
        } else {
            Next::After(after.saturating_add(len))
        }
    }))
}

/// The whole history, oldest first, fetched page by page and checked against
/// [`message_count`]: an agent that reasons over its context gets all of it or an error.
///
/// # Errors
///
/// [`Error::Incomplete`] if fewer messages were served than the history holds.
///
/// ```no_run
/// use ahp_guest::snapshot::{self, Error};
///
/// match snapshot::history() {
///     Ok(history) => println!("resuming after {} messages", history.len()),
///     Err(e @ Error::Incomplete { .. }) => eprintln!("refusing to resume on a partial context: {e}"),
///     Err(e) => eprintln!("{e}"),
/// }
/// ```
pub fn history() -> Result<Vec<Message>, Error> {
    let expected = message_count();
    let history: Vec<Message> = messages().collect();
    let got = u32::try_from(history.len()).unwrap_or(u32::MAX);
    if got != expected {
        return Err(Error::Incomplete { got, expected });
    }
    Ok(history)
}

/// One page of the history: at most `limit` messages starting at position `after` (0-based).
/// An empty page means `after` is past the end.
///
/// # Errors
///
/// [`Error::LimitTooLarge`] if `limit` exceeds [`MAX_PAGE`].
///
/// ```no_run
/// use ahp_guest::snapshot::{self, Error};
///
/// assert!(matches!(snapshot::messages_page(0, 10_000), Err(Error::LimitTooLarge(256))));
/// let first_ten = snapshot::messages_page(0, 10).unwrap();
/// ```
pub fn messages_page(after: u32, limit: u32) -> Result<Vec<Message>, Error> {
    raw::messages(after, limit).map_err(|e| match e {
        raw::Error::LimitTooLarge(max) => Error::LimitTooLarge(max),
    })
}

/// The source session's tool state as JSON text.
pub fn tool_state() -> String {
    raw::tool_state()
}

/// The tool state parsed into `T`.
///
/// # Errors
///
/// The JSON error if the tool state does not have `T`'s shape.
///
/// ```no_run
/// #[derive(serde::Deserialize)]
/// struct Inventory { items: Vec<String> }
///
/// match ahp_guest::snapshot::tool_state_as::<Inventory>() {
///     Ok(inv) => println!("{} items", inv.items.len()),
///     Err(e) => eprintln!("unexpected tool state: {e}"),
/// }
/// ```
pub fn tool_state_as<T: serde::de::DeserializeOwned>() -> Result<T, serde_json::Error> {
    serde_json::from_str(&raw::tool_state())
}

/// The part of the tool state at `pointer` (a JSON Pointer, RFC 6901, such as `/inventory`),
/// parsed into `T`: for an agent that needs one tool's state out of a larger object.
///
/// # Errors
///
/// The JSON error if the tool state has nothing at `pointer` or what is there does not have
/// `T`'s shape.
///
/// ```no_run
/// match ahp_guest::snapshot::tool_state_at::<Vec<String>>("/inventory/skus") {
///     Ok(skus) => println!("{} SKUs", skus.len()),
///     Err(e) => eprintln!("unexpected tool state: {e}"), // e.g. "the tool state has nothing at /inventory/skus"
/// }
/// ```
pub fn tool_state_at<T: serde::de::DeserializeOwned>(pointer: &str) -> Result<T, serde_json::Error> {
    let mut state: serde_json::Value = serde_json::from_str(&raw::tool_state())?;
    let part = state.pointer_mut(pointer).map(serde_json::Value::take).ok_or_else(|| {
        <serde_json::Error as serde::de::Error>::custom(format!("the tool state has nothing at {pointer}"))
    })?;
    serde_json::from_value(part)
}

/// The MCP servers the source session used, with their credential references.
pub fn mcp_servers() -> Vec<McpServer> {
    raw::mcp_servers()
}

/// The iterator [`messages`] returns.
#[derive(Debug)]
pub struct Messages(Pages<Message, u32>);

impl Iterator for Messages {
    type Item = Message;

    fn next(&mut self) -> Option<Message> {
        // MAX_PAGE is within the host's bound, so this cannot be refused; a refusal would end
        // the history as an empty page does (`history` then reports it incomplete).
        self.0
            .next(|&after| messages_page(after, MAX_PAGE))
            .and_then(Result::ok)
    }
}
