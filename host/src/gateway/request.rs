//! What a guest asks a model, in the gateway's neutral form (the WIT's `model.request`), with
//! every bound it is checked against before anything is reserved or sent
//! ([`Request::validate`]).

use serde::Serialize;

use super::{Error, Weight};

/// Most messages in one request.
pub const MAX_MESSAGES: usize = 1024;
/// Most parts in all messages of one request.
pub const MAX_PARTS: usize = 4096;
/// Most tools in one request.
pub const MAX_TOOLS: usize = 128;
/// Largest tool input schema, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Largest tool description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
/// Longest tool name, in bytes.
pub const MAX_TOOL_NAME_BYTES: usize = 64;
/// Longest tool-call id, in bytes.
pub const MAX_CALL_ID_BYTES: usize = 256;
/// Largest system prompt, in bytes.
pub const MAX_SYSTEM_BYTES: usize = 256 * 1024;
/// Most bytes of text in one request, all strings counted (system, parts, tool definitions).
pub const MAX_REQUEST_TEXT_BYTES: usize = 4 * 1024 * 1024;
/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user, or tool results handed back.
    User,
    /// The model.
    Assistant,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The provider's id of the call.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments, a JSON object as text.
    pub arguments_json: String,
}

/// A tool's result handed back to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// What the tool returned.
    pub content: String,
    /// Whether the tool failed.
    pub is_error: bool,
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text.
    Text(String),
    /// A tool call (assistant messages only).
    ToolCall(ToolCall),
    /// A tool result (user messages only).
    ToolResult(ToolResult),
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its parts, in order.
    pub parts: Vec<Part>,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDefinition {
    /// `a-z A-Z 0-9 _ -`, 1 to [`MAX_TOOL_NAME_BYTES`], unique in the request.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its input, a JSON Schema object as text.
    pub input_schema_json: String,
}

/// Whether and which tools the model may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// A call of the named tool.
    Tool(String),
}

/// One completion request, provider-neutral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// A policy model id.
    pub model: String,
    /// The system prompt; empty for none.
    pub system: String,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Whether it may call them.
    pub tool_choice: ToolChoice,
    /// The output cap wanted; `None` for the model's own.
    pub max_output_tokens: Option<u32>,
}

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

impl Request {
    /// Checks every rule and bound of the WIT's `model.request` (see the constants above).
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] naming the bound, or [`Error::InvalidRequest`] naming the rule.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |m: String| Err(Error::InvalidRequest(m));
        if self.messages.is_empty() {
            return invalid("at least one message is needed".into());
        }
        let mut weight = Weight {
            messages: self.messages.len(),
            parts: self.messages.iter().map(|m| m.parts.len()).sum(),
            tools: self.tools.len(),
            system: self.system.len(),
            text: self.system.len(),
        };
        weight.check()?;
        for (i, m) in self.messages.iter().enumerate() {
            if m.parts.is_empty() {
                return invalid(format!("messages[{i}] has no part"));
            }
            if m.parts.iter().all(|p| matches!(p, Part::Text(t) if t.is_empty())) {
                return invalid(format!("messages[{i}] has only empty text"));
            }
            for (j, p) in m.parts.iter().enumerate() {
                match (m.role, p) {
                    (_, Part::Text(t)) => weight.add_text(t.len())?,
                    (Role::Assistant, Part::ToolCall(c)) => {
                        weight.add_text(c.id.len() + c.name.len() + c.arguments_json.len())?;
                        if c.id.is_empty() || c.id.len() > MAX_CALL_ID_BYTES {
                            return invalid(format!(
                                "messages[{i}].parts[{j}]: a call id is 1 to {MAX_CALL_ID_BYTES} bytes"
                            ));
                        }
                        if !valid_tool_name(&c.name) {
                            return invalid(format!("messages[{i}].parts[{j}]: {:?} is not a tool name", c.name));
                        }
                        if !serde_json::from_str::<serde_json::Value>(&c.arguments_json).is_ok_and(|v| v.is_object()) {
                            return invalid(format!("messages[{i}].parts[{j}]: the arguments are not a JSON object"));
                        }
                    }
                    (Role::User, Part::ToolResult(r)) => {
                        weight.add_text(r.call_id.len() + r.content.len())?;
                        if r.call_id.is_empty() || r.call_id.len() > MAX_CALL_ID_BYTES {
                            return invalid(format!(
                                "messages[{i}].parts[{j}]: a call id is 1 to {MAX_CALL_ID_BYTES} bytes"
                            ));
                        }
                    }
                    (Role::User, Part::ToolCall(_)) => {
                        return invalid(format!("messages[{i}].parts[{j}]: a tool-call in a user message"));
                    }
                    (Role::Assistant, Part::ToolResult(_)) => {
                        return invalid(format!(
                            "messages[{i}].parts[{j}]: a tool-result in an assistant message"
                        ));
                    }
                }
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, t) in self.tools.iter().enumerate() {
            if !valid_tool_name(&t.name) {
                return invalid(format!(
                    "tools[{i}]: {:?} is not 1 to {MAX_TOOL_NAME_BYTES} of a-z A-Z 0-9 _ -",
                    t.name
                ));
            }
            if !names.insert(t.name.as_str()) {
                return invalid(format!("tools[{i}]: {:?} is defined twice", t.name));
            }
            weight.add_tool(i, t.name.len(), t.description.len(), t.input_schema_json.len())?;
            if !serde_json::from_str::<serde_json::Value>(&t.input_schema_json).is_ok_and(|v| v.is_object()) {
                return invalid(format!("tools[{i}].input-schema-json is not a JSON object"));
            }
        }
        match &self.tool_choice {
            ToolChoice::Required if self.tools.is_empty() => {
                return invalid("tool-choice required with no tools".into());
            }
            ToolChoice::Tool(name) if !names.contains(name.as_str()) => {
                return invalid(format!("tool-choice names {name:?}, which is not among the tools"));
            }
            _ => {}
        }
        if self.max_output_tokens == Some(0) {
            return invalid("max-output-tokens must be at least 1".into());
        }
        Ok(())
    }
}
