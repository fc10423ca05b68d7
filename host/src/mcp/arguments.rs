//! The arguments the conversation and delegation tools share, as the store takes them: who
//! acts (the human owner, or an agent through its exact endpoint and generation) and the page
//! size.

use ahp_store::conversation::{Acting, AgentActor};

use super::conversation_schema::ActingArgs;
use super::tool_error::ToolError;

/// Default page size of the listing tools.
const DEFAULT_PAGE: usize = 50;

/// The agent acting through the exact endpoint and generation `a` names.
pub(crate) fn actor(a: &ActingArgs) -> AgentActor {
    AgentActor {
        agent: a.agent_id.clone(),
        endpoint: a.endpoint_id.clone(),
        generation: a.controller_generation,
    }
}

/// The optional agent identity of `post_message` and `read_conversation`: all three or none.
pub(crate) fn acting(
    agent: Option<String>,
    endpoint: Option<String>,
    generation: Option<u64>,
) -> Result<Acting, ToolError> {
    match (agent, endpoint, generation) {
        (None, None, None) => Ok(Acting::Human),
        (Some(agent), Some(endpoint), Some(generation)) => Ok(Acting::Agent(AgentActor {
            agent,
            endpoint,
            generation,
        })),
        _ => Err(ToolError::invalid(
            "invalid agentId: agentId, endpointId and controllerGeneration go together (or all are absent, to act as the human participant)",
        )),
    }
}

pub(crate) fn page(limit: Option<usize>) -> usize {
    limit.unwrap_or(DEFAULT_PAGE)
}
