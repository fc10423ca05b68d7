//! A guest's `model.request`, read from its memory under the gateway's size bounds before the
//! host copies any of it (see [`super::bounded`]).
//!
//! [`GuestRequest`] mirrors the WIT `request` with lazy lists and strings. [`read`] weighs it
//! part by part with the gateway's [`Weight`] — counts first, then every string's length — and
//! refuses it with `too-large` at the first bound exceeded; only a request within every bound is
//! copied into a [`gateway::Request`], whose other rules `Request::validate` then checks.

use ahp_store::model_call::MAX_MODEL_ID_BYTES;
use wasmtime::StoreContextMut;
use wasmtime::component::{ComponentType, Lift, WasmList, WasmStr};

use super::bindings::v0_3::ahp::agent::model as wit;
use super::bounded::{element, len, string, weighing};
use crate::gateway::{self, MAX_TOOL_NAME_BYTES, Weight};

/// The WIT `request`, its lists and strings left in guest memory.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct GuestRequest {
    model: WasmStr,
    system: WasmStr,
    messages: WasmList<GuestMessage>,
    tools: WasmList<GuestTool>,
    #[component(name = "tool-choice")]
    tool_choice: GuestToolChoice,
    #[component(name = "max-output-tokens")]
    max_output_tokens: Option<u32>,
}

/// The WIT `message`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct GuestMessage {
    role: wit::Role,
    parts: WasmList<GuestPart>,
}

/// The WIT `part`.
#[derive(ComponentType, Lift)]
#[component(variant)]
pub(crate) enum GuestPart {
    #[component(name = "text")]
    Text(WasmStr),
    #[component(name = "tool-call")]
    ToolCall(GuestToolCall),
    #[component(name = "tool-result")]
    ToolResult(GuestToolResult),
}

/// The WIT `tool-call`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct GuestToolCall {
    id: WasmStr,
    name: WasmStr,
    #[component(name = "arguments-json")]
    arguments_json: WasmStr,
}

/// The WIT `tool-result`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct GuestToolResult {
    #[component(name = "call-id")]
    call_id: WasmStr,
    content: WasmStr,
    #[component(name = "is-error")]
    is_error: bool,
}

/// The WIT `tool-definition`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct GuestTool {
    name: WasmStr,
    description: WasmStr,
    #[component(name = "input-schema-json")]
    input_schema_json: WasmStr,
}

/// The WIT `tool-choice`.
#[derive(ComponentType, Lift)]
#[component(variant)]
pub(crate) enum GuestToolChoice {
    #[component(name = "auto")]
    Auto,
    #[component(name = "none")]
    None,
    #[component(name = "required")]
    Required,
    #[component(name = "tool")]
    Tool(WasmStr),
}

/// The request, copied, if it is within every size bound; else the `too-large` (or, for an
/// over-long model id or tool name, `invalid-request`) refusal.
///
/// # Errors
///
/// A malformed descriptor or text that is not UTF-8: the trap a typed lift would have raised.
pub(crate) fn read<T: 'static>(
    cx: &mut StoreContextMut<'_, T>,
    r: &GuestRequest,
) -> wasmtime::Result<Result<gateway::Request, gateway::Error>> {
    // Weighed first, copying nothing: the messages with their parts, and the tools.
    let weighed = weighing(cx, |cx| weigh(cx, r))?;
    let (messages, tools) = match weighed {
        Ok(lists) => lists,
        Err(refused) => return Ok(Err(refused)),
    };
    // Within every bound: copied.
    let mut copied = Vec::with_capacity(messages.len());
    for (role, parts) in messages {
        let parts = parts.iter().map(|p| part(cx, p)).collect::<wasmtime::Result<_>>()?;
        copied.push(gateway::Message {
            role: match role {
                wit::Role::User => gateway::Role::User,
                wit::Role::Assistant => gateway::Role::Assistant,
            },
            parts,
        });
    }
    let tools = tools
        .iter()
        .map(|t| {
            Ok(gateway::ToolDefinition {
                name: string(cx, &t.name)?,
                description: string(cx, &t.description)?,
                input_schema_json: string(cx, &t.input_schema_json)?,
            })
        })
        .collect::<wasmtime::Result<_>>()?;
    Ok(Ok(gateway::Request {
        model: string(cx, &r.model)?,
        system: string(cx, &r.system)?,
        messages: copied,
        tools,
        tool_choice: match &r.tool_choice {
            GuestToolChoice::Auto => gateway::ToolChoice::Auto,
            GuestToolChoice::None => gateway::ToolChoice::None,
            GuestToolChoice::Required => gateway::ToolChoice::Required,
            GuestToolChoice::Tool(name) => gateway::ToolChoice::Tool(string(cx, name)?),
        },
        max_output_tokens: r.max_output_tokens,
    }))
}

/// The request's messages (each with its lazy parts) and tools, if every count and length is
/// within its bound.
type Weighed = Result<(Vec<(wit::Role, Vec<GuestPart>)>, Vec<GuestTool>), gateway::Error>;

fn weigh<T: 'static>(cx: &mut StoreContextMut<'_, T>, r: &GuestRequest) -> wasmtime::Result<Weighed> {
    let invalid = |m: String| Ok(Err(gateway::Error::InvalidRequest(m)));
    if len(cx, &r.model)? > MAX_MODEL_ID_BYTES {
        return invalid(format!("the model id is over {MAX_MODEL_ID_BYTES} bytes"));
    }
    if let GuestToolChoice::Tool(name) = &r.tool_choice
        && len(cx, name)? > MAX_TOOL_NAME_BYTES
    {
        return invalid(format!("tool-choice names a tool of over {MAX_TOOL_NAME_BYTES} bytes"));
    }
    let system = len(cx, &r.system)?;
    let mut weight = Weight {
        messages: r.messages.len(),
        tools: r.tools.len(),
        system,
        text: system,
        parts: 0,
    };
    if let Err(e) = weight.check() {
        return Ok(Err(e));
    }
    let mut messages = Vec::with_capacity(r.messages.len());
    for i in 0..r.messages.len() {
        let m = element(cx, &r.messages, i)?;
        weight.parts += m.parts.len();
        if let Err(e) = weight.check() {
            return Ok(Err(e));
        }
        let mut parts = Vec::with_capacity(m.parts.len());
        for j in 0..m.parts.len() {
            let p = element(cx, &m.parts, j)?;
            let bytes = match &p {
                GuestPart::Text(t) => len(cx, t)?,
                GuestPart::ToolCall(c) => len(cx, &c.id)? + len(cx, &c.name)? + len(cx, &c.arguments_json)?,
                GuestPart::ToolResult(r) => len(cx, &r.call_id)? + len(cx, &r.content)?,
            };
            if let Err(e) = weight.add_text(bytes) {
                return Ok(Err(e));
            }
            parts.push(p);
        }
        messages.push((m.role, parts));
    }
    let mut tools = Vec::with_capacity(r.tools.len());
    for i in 0..r.tools.len() {
        let t = element(cx, &r.tools, i)?;
        let name = len(cx, &t.name)?;
        if name > MAX_TOOL_NAME_BYTES {
            return invalid(format!("tools[{i}]: a name is 1 to {MAX_TOOL_NAME_BYTES} bytes"));
        }
        let (description, schema) = (len(cx, &t.description)?, len(cx, &t.input_schema_json)?);
        if let Err(e) = weight.add_tool(i, name, description, schema) {
            return Ok(Err(e));
        }
        tools.push(t);
    }
    Ok(Ok((messages, tools)))
}

fn part<T: 'static>(cx: &StoreContextMut<'_, T>, p: &GuestPart) -> wasmtime::Result<gateway::Part> {
    Ok(match p {
        GuestPart::Text(t) => gateway::Part::Text(string(cx, t)?),
        GuestPart::ToolCall(c) => gateway::Part::ToolCall(gateway::ToolCall {
            id: string(cx, &c.id)?,
            name: string(cx, &c.name)?,
            arguments_json: string(cx, &c.arguments_json)?,
        }),
        GuestPart::ToolResult(r) => gateway::Part::ToolResult(gateway::ToolResult {
            call_id: string(cx, &r.call_id)?,
            content: string(cx, &r.content)?,
            is_error: r.is_error,
        }),
    })
}
