//! The mappings against the providers' documented shapes, and the request bounds at each limit
//! and one past.

use serde_json::{Value, json};

use super::*;

fn user(text: &str) -> Message {
    Message {
        role: Role::User,
        parts: vec![Part::Text(text.into())],
    }
}

fn request() -> Request {
    Request {
        model: "default".into(),
        system: "You forecast inventory.".into(),
        messages: vec![
            user("How many units of SKU-1?"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Text("Let me look.".into()),
                    Part::ToolCall(ToolCall {
                        id: "call_1".into(),
                        name: "inventory".into(),
                        arguments_json: r#"{"sku":"SKU-1"}"#.into(),
                    }),
                ],
            },
            Message {
                role: Role::User,
                parts: vec![
                    Part::ToolResult(ToolResult {
                        call_id: "call_1".into(),
                        content: "41 units".into(),
                        is_error: false,
                    }),
                    Part::Text("And next week?".into()),
                ],
            },
        ],
        tools: vec![ToolDefinition {
            name: "inventory".into(),
            description: "Units in stock".into(),
            input_schema_json: r#"{"type":"object","properties":{"sku":{"type":"string"}}}"#.into(),
        }],
        tool_choice: ToolChoice::Auto,
        max_output_tokens: Some(256),
    }
}

#[test]
fn openai_requests_carry_system_history_tools_and_results_in_protocol_order() {
    let body: Value = serde_json::from_slice(&openai::request_body("gpt-4.1-mini", &request(), 256)).unwrap();
    assert_eq!(body["model"], "gpt-4.1-mini");
    assert_eq!(body["max_tokens"], 256);
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "You forecast inventory."}));
    assert_eq!(m[1], json!({"role": "user", "content": "How many units of SKU-1?"}));
    assert_eq!(m[2]["content"], "Let me look.");
    assert_eq!(
        m[2]["tool_calls"][0],
        json!({"id": "call_1", "type": "function", "function": {"name": "inventory", "arguments": "{\"sku\":\"SKU-1\"}"}})
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "41 units"})
    );
    assert_eq!(m[4], json!({"role": "user", "content": "And next week?"}));
    assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
    assert_eq!(body["tool_choice"], "auto");
}

#[test]
fn anthropic_requests_carry_blocks_and_a_top_level_system() {
    let mut r = request();
    r.tool_choice = ToolChoice::Required;
    let body: Value = serde_json::from_slice(&anthropic::request_body("claude-sonnet-4-5", &r, 256)).unwrap();
    assert_eq!(body["system"], "You forecast inventory.");
    assert_eq!(body["max_tokens"], 256);
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(
        m[1]["content"][1],
        json!({"type": "tool_use", "id": "call_1", "name": "inventory", "input": {"sku": "SKU-1"}})
    );
    assert_eq!(
        m[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "call_1", "content": "41 units", "is_error": false})
    );
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
}

#[test]
fn openai_usage_includes_cached_tokens_in_the_prompt() {
    // The shape of OpenAI's documented response.
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{ "id": "call_9", "type": "function",
                             "function": { "name": "inventory", "arguments": "{\"sku\":\"SKU-2\"}" } }] } }],
        "usage": { "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                   "prompt_tokens_details": { "cached_tokens": 1920 },
                   "completion_tokens_details": { "reasoning_tokens": 100 } }
    });
    let reply = openai::parse_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(
        reply.parts,
        [Part::ToolCall(ToolCall {
            id: "call_9".into(),
            name: "inventory".into(),
            arguments_json: r#"{"sku":"SKU-2"}"#.into()
        })]
    );
    assert_eq!(
        reply.usage.unwrap(),
        ModelUsage {
            input_tokens: 86,
            cache_read_tokens: 1920,
            cache_write_tokens: 0,
            output_tokens: 300
        }
    );
    let lying = json!({ "choices": [{ "message": { "content": "x" } }],
                        "usage": { "prompt_tokens": 5, "completion_tokens": 1,
                                   "prompt_tokens_details": { "cached_tokens": 6 } } });
    assert!(openai::parse_response(lying.to_string().as_bytes()).is_err());
}

#[test]
fn anthropic_usage_excludes_cache_reads_and_writes_from_the_input() {
    let body = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
        "content": [ { "type": "text", "text": "Checking." },
                     { "type": "tool_use", "id": "toolu_1", "name": "inventory", "input": { "sku": "SKU-2" } } ],
        "stop_reason": "tool_use",
        "usage": { "input_tokens": 50, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 3000,
                   "output_tokens": 80 }
    });
    let reply = anthropic::parse_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(reply.parts[0], Part::Text("Checking.".into()));
    assert_eq!(
        reply.usage.unwrap(),
        ModelUsage {
            input_tokens: 50,
            cache_read_tokens: 3000,
            cache_write_tokens: 1000,
            output_tokens: 80
        }
    );
}

#[test]
fn responses_past_the_part_bound_are_refused() {
    let blocks = |n: usize| json!({ "content": vec![json!({"type": "text", "text": "x"}); n], "usage": {"input_tokens": 1, "output_tokens": 1} });
    assert!(anthropic::parse_response(blocks(MAX_RESPONSE_PARTS).to_string().as_bytes()).is_ok());
    assert!(anthropic::parse_response(blocks(MAX_RESPONSE_PARTS + 1).to_string().as_bytes()).is_err());
    let calls = |n: usize| {
        json!({ "choices": [{ "message": { "content": null, "tool_calls":
        vec![json!({"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}); n] } }] })
    };
    assert!(openai::parse_response(calls(MAX_RESPONSE_PARTS).to_string().as_bytes()).is_ok());
    assert!(openai::parse_response(calls(MAX_RESPONSE_PARTS + 1).to_string().as_bytes()).is_err());
}

fn kind(r: &Request) -> &'static str {
    r.validate().err().map_or("ok", |e| e.kind())
}

#[test]
fn request_bounds_hold_at_the_limit_and_one_past() {
    let with = |f: &dyn Fn(&mut Request)| {
        let mut r = request();
        f(&mut r);
        r
    };
    assert_eq!(kind(&request()), "ok");
    // Messages.
    assert_eq!(kind(&with(&|r| r.messages = vec![user("q"); MAX_MESSAGES])), "ok");
    assert_eq!(
        kind(&with(&|r| r.messages = vec![user("q"); MAX_MESSAGES + 1])),
        "too-large"
    );
    // Parts in all.
    let parts = |n: usize| Message {
        role: Role::User,
        parts: vec![Part::Text("p".into()); n],
    };
    assert_eq!(
        kind(&with(&|r| r.messages = vec![parts(MAX_PARTS / 2), parts(MAX_PARTS / 2)])),
        "ok"
    );
    assert_eq!(
        kind(&with(
            &|r| r.messages = vec![parts(MAX_PARTS / 2), parts(MAX_PARTS / 2 + 1)]
        )),
        "too-large"
    );
    // Tools.
    let tools = |n: usize| -> Vec<ToolDefinition> {
        (0..n)
            .map(|i| ToolDefinition {
                name: format!("t{i}"),
                description: String::new(),
                input_schema_json: "{}".into(),
            })
            .collect()
    };
    assert_eq!(kind(&with(&|r| r.tools = tools(MAX_TOOLS))), "ok");
    assert_eq!(kind(&with(&|r| r.tools = tools(MAX_TOOLS + 1))), "too-large");
    // A schema, a description, a name.
    let schema = |n: usize| format!(r#"{{"d":"{}"}}"#, "x".repeat(n - 8));
    assert_eq!(
        kind(&with(&|r| r.tools[0].input_schema_json = schema(MAX_SCHEMA_BYTES))),
        "ok"
    );
    assert_eq!(
        kind(&with(&|r| r.tools[0].input_schema_json = schema(MAX_SCHEMA_BYTES + 1))),
        "too-large"
    );
    assert_eq!(
        kind(&with(&|r| r.tools[0].description = "d".repeat(MAX_DESCRIPTION_BYTES))),
        "ok"
    );
    assert_eq!(
        kind(&with(
            &|r| r.tools[0].description = "d".repeat(MAX_DESCRIPTION_BYTES + 1)
        )),
        "too-large"
    );
    let named = |n: usize| {
        with(&|r| {
            r.tools[0].name = "n".repeat(n);
            r.tool_choice = ToolChoice::Auto;
        })
    };
    assert_eq!(kind(&named(MAX_TOOL_NAME_BYTES)), "ok");
    assert_eq!(kind(&named(MAX_TOOL_NAME_BYTES + 1)), "invalid-request");
    // The system prompt and the text in all.
    assert_eq!(kind(&with(&|r| r.system = "s".repeat(MAX_SYSTEM_BYTES))), "ok");
    assert_eq!(
        kind(&with(&|r| r.system = "s".repeat(MAX_SYSTEM_BYTES + 1))),
        "too-large"
    );
    let base: usize = {
        let r = request();
        let v = r.validate();
        assert!(v.is_ok());
        r.system.len()
            + r.messages
                .iter()
                .flat_map(|m| &m.parts)
                .map(|p| match p {
                    Part::Text(t) => t.len(),
                    Part::ToolCall(c) => c.id.len() + c.name.len() + c.arguments_json.len(),
                    Part::ToolResult(x) => x.call_id.len() + x.content.len(),
                })
                .sum::<usize>()
            + r.tools
                .iter()
                .map(|t| t.name.len() + t.description.len() + t.input_schema_json.len())
                .sum::<usize>()
    };
    let filler = |n: usize| with(&|r| r.messages.push(user(&"t".repeat(n))));
    assert_eq!(kind(&filler(MAX_REQUEST_TEXT_BYTES - base)), "ok");
    assert_eq!(kind(&filler(MAX_REQUEST_TEXT_BYTES - base + 1)), "too-large");
    // A call id.
    let id = |n: usize| {
        with(&|r| {
            if let Part::ToolCall(c) = &mut r.messages[1].parts[1] {
                c.id = "i".repeat(n);
            }
        })
    };
    assert_eq!(kind(&id(MAX_CALL_ID_BYTES)), "ok");
    assert_eq!(kind(&id(MAX_CALL_ID_BYTES + 1)), "invalid-request");
}

#[test]
fn requests_that_break_a_rule_are_invalid() {
    let with = |f: &dyn Fn(&mut Request)| {
        let mut r = request();
        f(&mut r);
        kind(&r)
    };
    assert_eq!(with(&|r| r.messages.clear()), "invalid-request");
    assert_eq!(with(&|r| r.messages[0].parts.clear()), "invalid-request");
    assert_eq!(
        with(&|r| r.messages[0].parts = vec![Part::Text(String::new())]),
        "invalid-request"
    );
    assert_eq!(with(&|r| r.messages[0].role = Role::Assistant), "ok");
    assert_eq!(
        with(&|r| r.messages[1].role = Role::User),
        "invalid-request",
        "a tool call from the user"
    );
    assert_eq!(
        with(&|r| r.messages[2].role = Role::Assistant),
        "invalid-request",
        "a result from the model"
    );
    assert_eq!(
        with(&|r| if let Part::ToolCall(c) = &mut r.messages[1].parts[1] {
            c.arguments_json = "[1]".into();
        }),
        "invalid-request"
    );
    assert_eq!(
        with(&|r| r.tools[0].input_schema_json = "not json".into()),
        "invalid-request"
    );
    assert_eq!(with(&|r| r.tools.push(r.tools[0].clone())), "invalid-request");
    assert_eq!(
        with(&|r| r.tool_choice = ToolChoice::Tool("absent".into())),
        "invalid-request"
    );
    assert_eq!(
        with(&|r| {
            r.tools.clear();
            r.tool_choice = ToolChoice::Required;
        }),
        "invalid-request"
    );
    assert_eq!(with(&|r| r.max_output_tokens = Some(0)), "invalid-request");
}

#[test]
fn an_echoed_credential_never_reaches_the_guest() {
    let body = br#"{"error":{"message":"Incorrect API key provided: Bearer sk-secret-123"}}"#;
    let e = excerpt(body, Some(b"sk-secret-123\n"));
    assert!(!e.contains("sk-secret-123"), "{e}");
    assert!(e.contains("[credential]"));
    assert!(excerpt(&[b'x'; 4096], None).len() <= MAX_ERROR_EXCERPT_BYTES);
    // JSON-escaped and base64 forms too.
    let key = b"sk-\"secret\"-123456";
    let body = br#"{"echo":"sk-\"secret\"-123456","blob":"QmVhcmVyIHNrLSJzZWNyZXQiLTEyMzQ1Ng=="}"#;
    let e = excerpt(body, Some(key));
    assert!(!e.contains("secret") && !e.contains("c2VjcmV0"), "{e}");
    // And from an answer.
    let parts = scrubbed(vec![Part::Text("your key is sk-\"secret\"-123456".into())], Some(key));
    assert_eq!(parts, [Part::Text("your key is [credential]".into())]);
}
