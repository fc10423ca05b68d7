//! `ahp:agent/tools`: the MCP tools of the agent's servers, as the guest sees them.
//!
//! This host is no MCP client yet: no tool is reachable.

use super::bindings::v0_3::ahp::agent::tools::{CallResult, Error, Host, Tool};
use super::context::AgentCtx;

impl Host for AgentCtx {
    async fn list(&mut self) -> Result<Vec<Tool>, Error> {
        Ok(Vec::new())
    }

    async fn call(&mut self, name: String, _arguments_json: String) -> Result<CallResult, Error> {
        Err(Error::UnknownTool(name))
    }
}
