//! The MCP tools of the agent's servers: those its snapshot lists and the host's operator
//! allows. The host is the MCP client: it connects, adds the server's credential itself (no
//! secret enters the sandbox), bounds what the server sends back and charges each call to the
//! budget.
//!
//! [`list`] returns the tools ready to hand to the model ([`Tool::definition`]); [`call`] calls
//! one with JSON arguments.
//!
//! ```no_run
//! use ahp_guest::tools;
//!
//! for tool in tools::list()? {
//!     println!("{} on {}: {}", tool.name, tool.server, tool.description);
//! }
//! let result = tools::call("inventory", &serde_json::json!({ "sku": "A-1" }))?;
//! println!("{}", result.text());
//! # Ok::<(), tools::Error>(())
//! ```

use crate::model::ToolDefinition;
use crate::wit::ahp::agent::tools as raw;

pub use raw::{CallResult, Content, EmbeddedResource, Media, Tool};

/// Why a tool call was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// No reachable server has a tool of that name (see [`list`]).
    UnknownTool(String),
    /// The arguments are not a JSON object, or too large; the payload says which.
    InvalidArguments(String),
    /// The server answered with more than the host's bound; the payload says which.
    TooLarge(String),
    /// The server answered with a protocol error; the payload is its message.
    ServerError(String),
    /// The server could not be reached or did not answer in time.
    Unavailable(String),
    /// This turn made as many calls as one turn may, or the egress ceiling is reached.
    Refused(String),
    /// The budget is spent: the agent should stop.
    Insolvent,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownTool(name) => write!(f, "no reachable server has a tool {name:?}"),
            Self::InvalidArguments(why) => write!(f, "invalid tool arguments: {why}"),
            Self::TooLarge(why) => write!(f, "the tool's server sent too much: {why}"),
            Self::ServerError(why) => write!(f, "the tool's server failed: {why}"),
            Self::Unavailable(why) => write!(f, "the tool's server is unavailable: {why}"),
            Self::Refused(why) => write!(f, "tool call refused: {why}"),
            Self::Insolvent => f.write_str("the budget is spent"),
        }
    }
}

impl std::error::Error for Error {}

impl From<raw::Error> for Error {
    fn from(e: raw::Error) -> Self {
        match e {
            raw::Error::UnknownTool(name) => Self::UnknownTool(name),
            raw::Error::InvalidArguments(why) => Self::InvalidArguments(why),
            raw::Error::TooLarge(why) => Self::TooLarge(why),
            raw::Error::ServerError(why) => Self::ServerError(why),
            raw::Error::Unavailable(why) => Self::Unavailable(why),
            raw::Error::Refused(why) => Self::Refused(why),
            raw::Error::Insolvent => Self::Insolvent,
        }
    }
}

/// The tools of every reachable server.
///
/// # Errors
///
/// [`Error::Refused`] past the per-turn bound, [`Error::Insolvent`].
pub fn list() -> Result<Vec<Tool>, Error> {
    raw::list().map_err(Error::from)
}

/// Calls tool `name` with `arguments` (a JSON object).
///
/// # Errors
///
/// Any [`Error`]. A tool that ran and failed is not an error: its result has `is_error`.
pub fn call(name: &str, arguments: &serde_json::Value) -> Result<CallResult, Error> {
    call_json(name, &arguments.to_string())
}

/// Calls tool `name` with `arguments_json`, a JSON object as text (what a model's tool call
/// carries).
///
/// # Errors
///
/// As [`call`].
pub fn call_json(name: &str, arguments_json: &str) -> Result<CallResult, Error> {
    raw::call(name, arguments_json).map_err(Error::from)
}

impl Tool {
    /// This tool as a model may call it.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema_json: self.input_schema_json.clone(),
        }
    }
}

impl CallResult {
    /// The result as text for a model: its text items, each other item described in a line
    /// (`[image image/png, 1024 bytes]`), else its structured content.
    pub fn text(&self) -> String {
        let lines: Vec<String> = self
            .content
            .iter()
            .map(|c| match c {
                Content::Text(t) => t.clone(),
                Content::Image(m) => format!("[image {}, {} bytes]", m.mime_type, m.data.len()),
                Content::Audio(m) => format!("[audio {}, {} bytes]", m.mime_type, m.data.len()),
                Content::EmbeddedResource(r) => match &r.text {
                    Some(text) => text.clone(),
                    None => format!("[resource {}]", r.uri),
                },
                Content::ResourceLink(uri) => format!("[link {uri}]"),
            })
            .collect();
        if lines.is_empty() {
            self.structured_json.clone().unwrap_or_default()
        } else {
            lines.join("\n")
        }
    }
}
