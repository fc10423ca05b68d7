//! `ahp:agent/tools`: the MCP tools of the agent's servers, as the guest sees them.
//!
//! Adapts the host's MCP client, the sandbox's [`Toolbox`](crate::tools::Toolbox) (its bounds,
//! charges and audit are documented there and in `wit/agent.wit`): converts its types and
//! errors to the interface's. Linked by hand, as `model` is, because a call needs the Store
//! itself: before a call is priced the CPU meter is settled (so the budget it reads counts every
//! micro-USD the guest burnt), and after the charge the fuel left is cut to what the budget still
//! pays for. Both functions are async, so a call still waiting on its server when the turn's
//! wall clock ends is dropped with the turn.

use wasmtime::StoreContextMut;
use wasmtime::component::Linker;

use super::bindings::v0_3::ahp::agent::tools::{CallResult, Content, EmbeddedResource, Error, Media, Tool};
use super::context::Metered;
use crate::tools;

/// Links `ahp:agent/tools@0.3.0`.
pub(crate) fn add_to_linker<T: Metered>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut inst = linker.instance("ahp:agent/tools@0.3.0")?;
    inst.func_wrap_async("list", |mut cx: StoreContextMut<'_, T>, (): ()| {
        Box::new(async move {
            let listed = cx.data_mut().agent().tools.list().await;
            Ok((listed
                .map(|tools| tools.into_iter().map(Tool::from).collect::<Vec<_>>())
                .map_err(Error::from),))
        })
    })?;
    inst.func_wrap_async(
        "call",
        |mut cx: StoreContextMut<'_, T>, (name, arguments_json): (String, String)| {
            Box::new(async move {
                T::settle(&mut cx)?;
                let st = cx.data_mut().agent();
                // An activation's held writes (a credential's audit, its spend) are durable
                // before the call can carry anything out and before its charge reads the budget.
                if let Err(e) = st.journal.flush() {
                    let why = format!("the activation's audit could not be recorded: {e}");
                    return Ok((Err(Error::Unavailable(why)),));
                }
                let db = st.db.clone();
                let called = st.tools.call(&db, &name, &arguments_json).await;
                if matches!(&called, Ok(r) if r.charged_micro_usd > 0) {
                    // The charge changed the budget: cut the fuel left to match.
                    let st = cx.data_mut().agent();
                    let budget = st.db(|db| db.budget(&st.transfer)).ok().flatten();
                    T::external_spend(&mut cx, budget.map_or(0, |b| b.remaining_micro_usd()))?;
                }
                Ok((called.map(CallResult::from).map_err(Error::from),))
            })
        },
    )?;
    Ok(())
}

impl From<tools::Tool> for Tool {
    fn from(t: tools::Tool) -> Self {
        Self {
            name: t.name,
            description: t.description,
            input_schema_json: t.input_schema_json,
            server: t.server,
        }
    }
}

impl From<tools::CallResult> for CallResult {
    fn from(r: tools::CallResult) -> Self {
        Self {
            content: r.content.into_iter().map(Into::into).collect(),
            structured_json: r.structured_json,
            is_error: r.is_error,
            charged_micro_usd: r.charged_micro_usd,
        }
    }
}

impl From<tools::Content> for Content {
    fn from(c: tools::Content) -> Self {
        match c {
            tools::Content::Text(t) => Content::Text(t),
            tools::Content::Image(mime_type, data) => Content::Image(Media { mime_type, data }),
            tools::Content::Audio(mime_type, data) => Content::Audio(Media { mime_type, data }),
            tools::Content::Resource {
                uri,
                mime_type,
                text,
                blob,
            } => Content::EmbeddedResource(EmbeddedResource {
                uri,
                mime_type,
                text,
                blob,
            }),
            tools::Content::ResourceLink(uri) => Content::ResourceLink(uri),
        }
    }
}

impl From<tools::Error> for Error {
    fn from(e: tools::Error) -> Self {
        match e {
            tools::Error::UnknownTool(m) => Error::UnknownTool(m),
            tools::Error::InvalidArguments(m) => Error::InvalidArguments(m),
            tools::Error::TooLarge(m) => Error::TooLarge(m),
            tools::Error::ServerError(m) => Error::ServerError(m),
            tools::Error::Unavailable(m) => Error::Unavailable(m),
            tools::Error::Refused(m) => Error::Refused(m),
            tools::Error::Insolvent => Error::Insolvent,
        }
    }
}
