//! Controllable guest for the host's model-gateway tests, through the raw `ahp:agent/model`
//! bindings. `resume` succeeds at once; each `turn` acts on the body of its *first* queued
//! delivery, replies one line saying what happened, and consumes it:
//!
//! - `ask <model> <question>`: one `complete` with the snapshot's system prompt, its history and
//!   the question; replies `answer <text> | charged <n> | usage <in> <cache-read> <cache-write>
//!   <out>`, or `error <kind> charged <n>: <message>`;
//! - `tool <model> <question>`: as `ask` with one tool, `inventory`; when the model calls it,
//!   hands back `41 units` and asks again (at most 4 steps), then replies as `ask`;
//! - `loop <model> <n>`: up to `<n>` `complete` calls, stopping at the first error; replies
//!   `<k> calls, charged <total>, then <kind or "nothing">`;
//! - `estimate <model>`: replies `reserve <micro-usd> for <input> + <output> tokens` or the error;
//! - `models`: replies the ids offered, comma-separated;
//! - `report`: `metering.report("model_tokens", 1)`, replying `ok` or the refusal.

use ahp_guest::wit::ahp::agent::model::{
    self, Error, Message, Part, Request, Role, ToolChoice, ToolDefinition, ToolResult,
};
use ahp_guest::{Agent, conversations, metering, snapshot};

struct ModelProber;

fn describe(e: &Error) -> String {
    let (kind, charged, message) = match e {
        Error::UnknownModel(m) => ("unknown-model", 0, m.clone()),
        Error::InvalidRequest(m) => ("invalid-request", 0, m.clone()),
        Error::TooLarge(m) => ("too-large", 0, m.clone()),
        Error::InsufficientBudget(n) => ("insufficient-budget", 0, format!("short {n}")),
        Error::RateLimited(f) => ("rate-limited", f.charged_micro_usd, f.message.clone()),
        Error::ProviderError(f) => ("provider-error", f.charged_micro_usd, f.message.clone()),
        Error::Unavailable(f) => ("unavailable", f.charged_micro_usd, f.message.clone()),
        Error::Insolvent => ("insolvent", 0, String::new()),
    };
    format!("error {kind} charged {charged}: {message}")
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::UnknownModel(_) => "unknown-model",
        Error::InvalidRequest(_) => "invalid-request",
        Error::TooLarge(_) => "too-large",
        Error::InsufficientBudget(_) => "insufficient-budget",
        Error::RateLimited(_) => "rate-limited",
        Error::ProviderError(_) => "provider-error",
        Error::Unavailable(_) => "unavailable",
        Error::Insolvent => "insolvent",
    }
}

fn text(role: Role, t: &str) -> Message {
    Message {
        role,
        parts: vec![Part::Text(t.to_owned())],
    }
}

/// The system prompt, the snapshot's history and `question`, for `model`.
fn request(model: &str, question: &str) -> Result<Request, Box<dyn std::error::Error>> {
    let mut messages: Vec<Message> = snapshot::history()?
        .iter()
        .map(|m| {
            text(
                if m.role == "assistant" {
                    Role::Assistant
                } else {
                    Role::User
                },
                &m.content,
            )
        })
        .collect();
    messages.push(text(Role::User, question));
    Ok(Request {
        model: model.to_owned(),
        system: snapshot::system_prompt(),
        messages,
        tools: vec![],
        tool_choice: ToolChoice::Auto,
        max_output_tokens: None,
    })
}

fn answer(c: &model::Completion) -> String {
    let text: String = c
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let u = &c.usage;
    format!(
        "answer {text} | charged {} | usage {} {} {} {}",
        c.charged_micro_usd, u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens
    )
}

fn act(body: &str) -> Result<String, Box<dyn std::error::Error>> {
    let mut words = body.splitn(3, ' ');
    let mode = words.next().unwrap_or("");
    let model = words.next().unwrap_or("default");
    let rest = words.next().unwrap_or("");
    Ok(match mode {
        "ask" => match model::complete(&request(model, rest)?) {
            Ok(c) => answer(&c),
            Err(e) => describe(&e),
        },
        "tool" => {
            let mut r = request(model, rest)?;
            r.tools = vec![ToolDefinition {
                name: "inventory".into(),
                description: "Units of a SKU in stock.".into(),
                input_schema_json: r#"{"type":"object","properties":{"sku":{"type":"string"}}}"#.into(),
            }];
            for _ in 0..4 {
                let c = match model::complete(&r) {
                    Ok(c) => c,
                    Err(e) => return Ok(describe(&e)),
                };
                let calls: Vec<_> = c
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall(call) => Some(call.id.clone()),
                        _ => None,
                    })
                    .collect();
                if calls.is_empty() {
                    return Ok(answer(&c));
                }
                r.messages.push(Message {
                    role: Role::Assistant,
                    parts: c.parts.clone(),
                });
                r.messages.push(Message {
                    role: Role::User,
                    parts: calls
                        .into_iter()
                        .map(|call_id| {
                            Part::ToolResult(ToolResult {
                                call_id,
                                content: "41 units".into(),
                                is_error: false,
                            })
                        })
                        .collect(),
                });
            }
            "no answer in 4 steps".into()
        }
        "loop" => {
            let n: u32 = rest.trim().parse().map_err(|_| "loop needs a count")?;
            let r = request(model, "again")?;
            let (mut k, mut total) = (0, 0);
            let mut then = "nothing".to_owned();
            for _ in 0..n {
                match model::complete(&r) {
                    Ok(c) => {
                        k += 1;
                        total += c.charged_micro_usd;
                    }
                    Err(e) => {
                        total += match &e {
                            Error::RateLimited(f) | Error::ProviderError(f) | Error::Unavailable(f) => {
                                f.charged_micro_usd
                            }
                            _ => 0,
                        };
                        then = kind(&e).to_owned();
                        break;
                    }
                }
            }
            format!("{k} calls, charged {total}, then {then}")
        }
        "estimate" => match model::estimate(&request(model, "estimate")?) {
            Ok(r) => format!(
                "reserve {} for {} + {} tokens",
                r.reserved_micro_usd, r.input_tokens, r.max_output_tokens
            ),
            Err(e) => describe(&e),
        },
        "models" => model::models().into_iter().map(|m| m.id).collect::<Vec<_>>().join(","),
        "report" => match metering::report("model_tokens", 1) {
            Ok(_) => "ok".into(),
            Err(e) => format!("refused {e:?}"),
        },
        other => format!("unknown mode {other:?}"),
    })
}

impl Agent for ModelProber {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }

    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let queued = conversations::inbox().collect::<Result<Vec<_>, _>>()?;
        let Some(first) = queued.first() else {
            return Ok(());
        };
        let line = act(first.message().body.trim())?;
        first.reply(&line)?;
        first.consume()?;
        Ok(())
    }
}

ahp_guest::export_agent!(ModelProber);
