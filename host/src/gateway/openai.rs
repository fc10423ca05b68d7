//! The OpenAI Chat Completions mapping (`POST {endpoint}/chat/completions`, non-streaming), both
//! ways. Spoken by OpenAI and by Ollama, vLLM, llama.cpp server, LM Studio, LiteLLM, OpenRouter.
//!
//! - The system prompt is a `system` message; an assistant message's text is its `content` and
//!   its tool calls are `tool_calls` (`{id, type: "function", function: {name, arguments}}`); each
//!   tool result is a `tool` message (`tool_call_id`, `content`; a failed tool's content starts
//!   with `[error] `, the protocol having no flag for it), sent before the user text of the same
//!   message. Tools are `{type: "function", function: {name, description, parameters}}`; the
//!   output cap is `max_tokens`.
//! - Usage: `prompt_tokens` **includes** `prompt_tokens_details.cached_tokens`, so the neutral
//!   input is `prompt_tokens - cached_tokens` and the cache read is `cached_tokens`; the protocol
//!   reports no cache writes. `completion_tokens` (reasoning included) is the output.

use serde_json::{Value, json};

use super::{MAX_RESPONSE_PARTS, Part, Reply, Request, Role, StopReason, ToolCall, ToolChoice};
use ahp_store::ModelUsage;

/// The JSON body of `request` for the provider's model `model` with output cap `max_tokens`.
pub fn request_body(model: &str, request: &Request, max_tokens: u32) -> Vec<u8> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({ "role": "system", "content": request.system }));
    }
    for m in &request.messages {
        let text: Vec<&str> = m
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) if !t.is_empty() => Some(t.as_str()),
                _ => None,
            })
            .collect();
        match m.role {
            Role::User => {
                for p in &m.parts {
                    if let Part::ToolResult(r) = p {
                        let content = if r.is_error {
                            format!("[error] {}", r.content)
                        } else {
                            r.content.clone()
                        };
                        messages.push(json!({ "role": "tool", "tool_call_id": r.call_id, "content": content }));
                    }
                }
                if !text.is_empty() {
                    messages.push(json!({ "role": "user", "content": text.join("\n") }));
                }
            }
            Role::Assistant => {
                let calls: Vec<Value> = m
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall(c) => Some(json!({
                            "id": c.id, "type": "function",
                            "function": { "name": c.name, "arguments": c.arguments_json },
                        })),
                        _ => None,
                    })
                    .collect();
                let mut msg = json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { Value::from(text.join("\n")) },
                });
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                messages.push(msg);
            }
        }
    }
    let mut body = json!({ "model": model, "messages": messages, "max_tokens": max_tokens, "stream": false });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({ "type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": serde_json::from_str::<Value>(&t.input_schema_json).unwrap_or_else(|_| json!({})),
                }})
            })
            .collect();
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
        };
    }
    serde_json::to_vec(&body).expect("JSON serializes")
}

fn u64_at(v: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_u64()
}

/// The neutral usage of a Chat Completions `usage` object (see the [module docs](self)).
///
/// # Errors
///
/// A sentence, if a count is missing or the cached tokens exceed the prompt's.
pub fn usage(u: &Value) -> Result<ModelUsage, String> {
    let prompt = u64_at(u, &["prompt_tokens"]).ok_or("usage.prompt_tokens is missing")?;
    let output = u64_at(u, &["completion_tokens"]).ok_or("usage.completion_tokens is missing")?;
    let cached = u64_at(u, &["prompt_tokens_details", "cached_tokens"]).unwrap_or(0);
    if cached > prompt {
        return Err(format!("usage counts {cached} cached of {prompt} prompt tokens"));
    }
    Ok(ModelUsage {
        input_tokens: prompt - cached,
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        output_tokens: output,
    })
}

/// The neutral reply of a Chat Completions response body.
///
/// # Errors
///
/// A sentence saying what is malformed (not JSON, no choice, a bad tool call, too many parts).
pub fn parse_response(body: &[u8]) -> Result<Reply, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("no choices")?;
    let message = choice.get("message").ok_or("choices[0] has no message")?;
    let mut parts = Vec::new();
    match message.get("content") {
        Some(Value::String(t)) if !t.is_empty() => parts.push(Part::Text(t.clone())),
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(_) => return Err("message.content is not text".into()),
    }
    if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
        let calls = calls.as_array().ok_or("message.tool_calls is not a list")?;
        if calls.len() > MAX_RESPONSE_PARTS {
            return Err(format!("more than {MAX_RESPONSE_PARTS} parts"));
        }
        for c in calls {
            let text = |k: &str| c.get("function").and_then(|f| f.get(k)).and_then(Value::as_str);
            let (Some(id), Some(name), Some(arguments)) =
                (c.get("id").and_then(Value::as_str), text("name"), text("arguments"))
            else {
                return Err("a tool call lacks its id, name or arguments".into());
            };
            parts.push(Part::ToolCall(ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments_json: arguments.to_owned(),
            }));
        }
    }
    if parts.len() > MAX_RESPONSE_PARTS {
        return Err(format!("more than {MAX_RESPONSE_PARTS} parts"));
    }
    let stop_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("stop") => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("content_filter") => StopReason::ContentFilter,
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
