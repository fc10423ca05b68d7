//! `ahp:agent/tools`: the MCP tools of the agent's servers, as the guest sees them.
//!
//! Only adapts: the host's MCP client is the sandbox's [`Toolbox`](crate::tools::Toolbox)
//! (its bounds, charges and audit are documented there and in `wit/agent.wit`); this converts
//! its types and errors to the interface's. Both functions are async host functions (see
//! `bindings`), so a call still waiting on its server when the turn's wall clock ends is
//! dropped with the turn.

use super::bindings::v0_3::ahp::agent::tools::{CallResult, Content, EmbeddedResource, Error, Host, Media, Tool};
use super::context::AgentCtx;
use crate::tools;

impl Host for AgentCtx {
    async fn list(&mut self) -> Result<Vec<Tool>, Error> {
        let listed = self.tools.list().await.map_err(error)?;
        Ok(listed
            .into_iter()
            .map(|t| Tool {
                name: t.name,
                description: t.description,
                input_schema_json: t.input_schema_json,
                server: t.server,
            })
            .collect())
    }

    async fn call(&mut self, name: String, arguments_json: String) -> Result<CallResult, Error> {
        // An activation's held writes (a credential's audit, its spend) are durable before the
        // call can carry anything out and before the tool's charge reads the budget.
        self.journal
            .flush()
            .map_err(|e| Error::Unavailable(format!("the activation's audit could not be recorded: {e}")))?;
        let db = self.db.clone();
        let r = self.tools.call(&db, &name, &arguments_json).await.map_err(error)?;
        Ok(CallResult {
            content: r.content.into_iter().map(content).collect(),
            structured_json: r.structured_json,
            is_error: r.is_error,
            charged_micro_usd: r.charged_micro_usd,
        })
    }
}

fn content(c: tools::Content) -> Content {
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

fn error(e: tools::Error) -> Error {
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
