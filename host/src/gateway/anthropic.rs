//! The Anthropic Messages mapping (`POST {endpoint}/messages`, non-streaming), both ways.
//!
//! - The system prompt is the top-level `system`; each message's parts are content blocks:
//!   `text`, `tool_use` (`{id, name, input}`, the arguments parsed to an object) in assistant
//!   messages, `tool_result` (`{tool_use_id, content, is_error}`) in user messages. Empty text
//!   blocks, which the API refuses, are left out. Tools are `{name, description, input_schema}`;
//!   `tool_choice` is `auto`, `none`, `any` (required) or `{type: "tool", name}`; the output cap
//!   is `max_tokens`.
//! - Usage: `input_tokens` **excludes** `cache_read_input_tokens` and
//!   `cache_creation_input_tokens`, so the three map one to one onto the neutral input, cache
//!   read and cache write; `output_tokens` is the output.

use serde_json::{Value, json};

use super::{MAX_RESPONSE_PARTS, Part, Reply, Request, Role, StopReason, ToolCall, ToolChoice};
use ahp_store::ModelUsage;

/// The JSON body of `request` for the provider's model `model` with output cap `max_tokens`.
pub fn request_body(model: &str, request: &Request, max_tokens: u32) -> Vec<u8> {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            let content: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text(t) if t.is_empty() => None,
                    Part::Text(t) => Some(json!({ "type": "text", "text": t })),
                    Part::ToolCall(c) => Some(json!({
                        "type": "tool_use", "id": c.id, "name": c.name,
                        "input": serde_json::from_str::<Value>(&c.arguments_json).unwrap_or_else(|_| json!({})),
                    })),
                    Part::ToolResult(r) => Some(json!({
                        "type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error,
                    })),
                })
                .collect();
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({ "role": role, "content": content })
        })
        .collect();
    let mut body = json!({ "model": model, "max_tokens": max_tokens, "messages": messages });
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": serde_json::from_str::<Value>(&t.input_schema_json).unwrap_or_else(|_| json!({})),
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!({ "type": "auto" }),
            ToolChoice::None => json!({ "type": "none" }),
            ToolChoice::Required => json!({ "type": "any" }),
            ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
        };
    }
    serde_json::to_vec(&body).expect("JSON serializes")
}

/// The neutral usage of a Messages `usage` object (see the [module docs](self)).
///
/// # Errors
///
/// A sentence, if the input or output count is missing.
pub fn usage(u: &Value) -> Result<ModelUsage, String> {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    Ok(ModelUsage {
        input_tokens: n("input_tokens").ok_or("usage.input_tokens is missing")?,
        cache_read_tokens: n("cache_read_input_tokens").unwrap_or(0),
        cache_write_tokens: n("cache_creation_input_tokens").unwrap_or(0),
        output_tokens: n("output_tokens").ok_or("usage.output_tokens is missing")?,
    })
}

/// The neutral reply of a Messages response body.
///
/// # Errors
///
/// A sentence saying what is malformed (not JSON, no content list, a bad block, too many parts).
pub fn parse_response(body: &[u8]) -> Result<Reply, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let blocks = v.get("content").and_then(Value::as_array).ok_or("no content list")?;
    if blocks.len() > MAX_RESPONSE_PARTS {
        return Err(format!("more than {MAX_RESPONSE_PARTS} parts"));
    }
    let mut parts = Vec::with_capacity(blocks.len());
    for b in blocks {
        let text = |k: &str| b.get(k).and_then(Value::as_str);
        match text("type") {
            Some("text") => parts.push(Part::Text(text("text").ok_or("a text block has no text")?.to_owned())),
            Some("tool_use") => {
                let (Some(id), Some(name), Some(input)) = (text("id"), text("name"), b.get("input")) else {
                    return Err("a tool_use block lacks its id, name or input".into());
                };
                parts.push(Part::ToolCall(ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments_json: input.to_string(),
                }));
            }
            // Thinking and other blocks are the provider's, not the agent's.
            _ => {}
        }
    }
    let stop_reason = match v.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("tool_use") => StopReason::ToolUse,
        Some("refusal") => StopReason::ContentFilter,
        _ => StopReason::Other,
    };
    let usage = match v.get("usage") {
        None | Some(Value::Null) => None,
        Some(u) => Some(usage(u)?),
    };
    Ok(Reply {
        parts,
        stop_reason,
        usage,
    })
}
