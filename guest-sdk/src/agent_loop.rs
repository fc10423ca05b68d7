//! The agent loop: the model thinks, asks for tool calls, the host runs them over MCP, their
//! results go back to the model, and so on until the model answers — or a step cap is reached.
//!
//! ```no_run
//! use ahp_guest::agent_loop;
//! use ahp_guest::model::Message;
//!
//! let request = agent_loop::request_with_tools("default", "You help with stock.", vec![Message::user("How many A-1?")])?;
//! let answer = agent_loop::run(request, 8)?;
//! println!("{} after {} steps", answer.text, answer.steps);
//! # Ok::<(), agent_loop::Error>(())
//! ```
//!
//! A tool that fails, or that the host refuses to call (an unknown name, bad arguments, a
//! server that does not answer), is handed back to the model as an error result, so the model
//! can recover; only a spent budget ([`model::Error::Insolvent`],
//! [`tools::Error::Insolvent`]) or a model call that fails ends the loop with an error.

use crate::model::{self, Message, Part, Request, Role, ToolResult};
use crate::tools;

/// What the loop ended with.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The model's final text.
    pub text: String,
    /// How many model calls it took.
    pub steps: u32,
    /// How many tool calls were run.
    pub tool_calls: u32,
    /// What the model and tool calls were charged in all, in micro-USD.
    pub charged_micro_usd: u64,
    /// The conversation as it ended: the request's messages, then every assistant message and
    /// tool result.
    pub messages: Vec<Message>,
}

/// Why the loop stopped without an answer.
#[derive(Debug, Clone)]
pub enum Error {
    /// A model call failed.
    Model(model::Error),
    /// Listing the tools failed, or a tool call found the budget spent.
    Tools(tools::Error),
    /// The model still asked for tools after `steps` calls; `text` is what it last wrote.
    StepCap {
        /// The cap that was reached.
        steps: u32,
        /// The model's last text, possibly empty.
        text: String,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Model(e) => write!(f, "{e}"),
            Self::Tools(e) => write!(f, "{e}"),
            Self::StepCap { steps, .. } => write!(f, "the model still called tools after {steps} steps"),
        }
    }
}

impl std::error::Error for Error {}

impl From<model::Error> for Error {
    fn from(e: model::Error) -> Self {
        Self::Model(e)
    }
}

impl From<tools::Error> for Error {
    fn from(e: tools::Error) -> Self {
        Self::Tools(e)
    }
}

/// A request to `model` offering every tool of the agent's reachable servers.
///
/// # Errors
///
/// [`Error::Tools`] if the tools cannot be listed.
pub fn request_with_tools(model: &str, system: &str, messages: Vec<Message>) -> Result<Request, Error> {
    let tools = tools::list()?.iter().map(tools::Tool::definition).collect();
    Ok(Request::new(model, system, messages).with_tools(tools))
}

/// Runs the loop on `request` for at most `max_steps` model calls.
///
/// # Errors
///
/// [`Error::Model`] when a model call fails, [`Error::Tools`] when the budget is spent during a
/// tool call, [`Error::StepCap`] when the model never stops calling tools.
pub fn run(mut request: Request, max_steps: u32) -> Result<Answer, Error> {
    let (mut tool_calls, mut charged) = (0, 0);
    for step in 1..=max_steps {
        let completion = model::complete(&request)?;
        charged += completion.charged_micro_usd;
        let calls: Vec<_> = completion.tool_calls().cloned().collect();
        let text = completion.text();
        request.messages.push(Message {
            role: Role::Assistant,
            parts: completion.parts,
        });
        if calls.is_empty() {
            return Ok(Answer {
                text,
                steps: step,
                tool_calls,
                charged_micro_usd: charged,
                messages: request.messages,
            });
        }
        if step == max_steps {
            return Err(Error::StepCap { steps: max_steps, text });
        }
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            tool_calls += 1;
            let (content, is_error) = match tools::call_json(&call.name, &call.arguments_json) {
                Ok(r) => {
                    charged += r.charged_micro_usd;
                    (r.text(), r.is_error)
                }
                Err(tools::Error::Insolvent) => return Err(Error::Tools(tools::Error::Insolvent)),
                Err(e) => (e.to_string(), true),
            };
            results.push(Part::ToolResult(ToolResult {
                call_id: call.id,
                content,
                is_error,
            }));
        }
        request.messages.push(Message {
            role: Role::User,
            parts: results,
        });
    }
    Err(Error::StepCap {
        steps: max_steps,
        text: String::new(),
    })
}
