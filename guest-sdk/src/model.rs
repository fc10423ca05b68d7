//! The host's model gateway: think with the models the host's operator offers.
//!
//! The host calls the provider with the operator's credential — no key ever enters the
//! sandbox — and pays for the call from the transfer's budget: before the call it reserves the
//! call's worst case (its input at most, plus the output cap), lowering the output cap to what
//! the budget still pays for, and after the call it charges exactly what the provider's usage
//! says. A call the budget cannot pay is refused with [`Error::InsufficientBudget`] before any
//! provider sees it, so spend never passes the allocation.
//!
//! [`Request`] and [`Message`] are built with the helpers below; [`Completion::text`] and
//! [`Completion::tool_calls`] read the answer. To let the model call the agent's MCP tools
//! until it answers, use [`agent_loop`](crate::agent_loop).
//!
//! ```no_run
//! use ahp_guest::model::{self, Message, Request};
//!
//! let request = Request::new("default", "You are terse.", vec![Message::user("What is 2 + 2?")]);
//! let answer = model::complete(&request)?;
//! println!("{} (charged {} micro-USD)", answer.text(), answer.charged_micro_usd);
//! # Ok::<(), model::Error>(())
//! ```

use crate::wit::ahp::agent::model as raw;

pub use raw::{
    Completion, Failure, Message, ModelInfo, Part, Prices, Request, Reservation, Role, StopReason, ToolCall,
    ToolChoice, ToolDefinition, ToolResult, Usage,
};

/// Why a model call was refused or failed.
#[derive(Debug, Clone)]
pub enum Error {
    /// No model of that id is offered (see [`models`]).
    UnknownModel(String),
    /// The request breaks a rule; the payload says which.
    InvalidRequest(String),
    /// The request is larger than a host bound or the model's context; the payload says which.
    TooLarge(String),
    /// The remaining budget cannot pay for the smallest useful call; the payload is the
    /// shortfall in micro-USD. Nothing was sent.
    InsufficientBudget(u64),
    /// The provider's rate limit refused the call; try later.
    RateLimited(Failure),
    /// The provider answered with an error or a response the host cannot read.
    ProviderError(Failure),
    /// The provider could not be reached or did not answer in time.
    Unavailable(Failure),
    /// The budget is spent: the agent should stop.
    Insolvent,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownModel(id) => write!(f, "no model {id:?} is offered to this agent"),
            Self::InvalidRequest(why) => write!(f, "invalid model request: {why}"),
            Self::TooLarge(why) => write!(f, "model request too large: {why}"),
            Self::InsufficientBudget(short) => {
                write!(f, "the budget cannot pay for this call ({short} micro-USD short)")
            }
            Self::RateLimited(e) => write!(
                f,
                "rate limited by the provider: {} (charged {})",
                e.message, e.charged_micro_usd
            ),
            Self::ProviderError(e) => write!(f, "provider error: {} (charged {})", e.message, e.charged_micro_usd),
            Self::Unavailable(e) => write!(f, "model unavailable: {} (charged {})", e.message, e.charged_micro_usd),
            Self::Insolvent => f.write_str("the budget is spent"),
        }
    }
}

impl std::error::Error for Error {}

impl From<raw::Error> for Error {
    fn from(e: raw::Error) -> Self {
        match e {
            raw::Error::UnknownModel(id) => Self::UnknownModel(id),
            raw::Error::InvalidRequest(why) => Self::InvalidRequest(why),
            raw::Error::TooLarge(why) => Self::TooLarge(why),
            raw::Error::InsufficientBudget(short) => Self::InsufficientBudget(short),
            raw::Error::RateLimited(f) => Self::RateLimited(f),
            raw::Error::ProviderError(f) => Self::ProviderError(f),
            raw::Error::Unavailable(f) => Self::Unavailable(f),
            raw::Error::Insolvent => Self::Insolvent,
        }
    }
}

/// The models this agent may call, in the operator's order.
pub fn models() -> Vec<ModelInfo> {
    raw::models()
}

/// Calls the model; see the [module docs](self) for what is reserved and charged.
///
/// # Errors
///
/// Any [`Error`]; [`Error::InsufficientBudget`] and [`Error::Insolvent`] mean the budget is
/// (nearly) spent.
pub fn complete(request: &Request) -> Result<Completion, Error> {
    raw::complete(request).map_err(Error::from)
}

/// What [`complete`] would reserve now, without calling the provider or reserving anything.
///
/// # Errors
///
/// As [`complete`] before its call.
pub fn estimate(request: &Request) -> Result<Reservation, Error> {
    raw::estimate(request).map_err(Error::from)
}

impl Request {
    /// A request to `model` with a system prompt and messages, no tools, the model's own
    /// output cap.
    pub fn new(model: &str, system: &str, messages: Vec<Message>) -> Self {
        Self {
            model: model.to_owned(),
            system: system.to_owned(),
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_output_tokens: None,
        }
    }

    /// The same request with `tools` the model may call.
    #[must_use]
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = tools;
        self
    }

    /// The same request with an output cap of `max_output_tokens`.
    #[must_use]
    pub fn with_max_output_tokens(mut self, max_output_tokens: u32) -> Self {
        self.max_output_tokens = Some(max_output_tokens);
        self
    }
}

impl Message {
    /// A user message of one text part.
    pub fn user(text: &str) -> Self {
        Self {
            role: Role::User,
            parts: vec![Part::Text(text.to_owned())],
        }
    }

    /// An assistant message of one text part.
    pub fn assistant(text: &str) -> Self {
        Self {
            role: Role::Assistant,
            parts: vec![Part::Text(text.to_owned())],
        }
    }
}

impl Completion {
    /// The answer's text parts, joined.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls the model asks for, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }
}
