//! The delegation tools' arguments and results, in camelCase: tasks, their attempts, waits and
//! goals.
//!
//! The conventions are the conversation tools' ([`conversation_schema`](super::conversation_schema)):
//! doc comments on fields are the JSON Schema descriptions clients see; arguments are converted
//! into the store's types, which validate and bound them; mutations say `replayed` and
//! `stateChanged`; no result carries a principal, a digest or an idempotency key.
//!
//! **Acting.** A call either names the agent it acts as — `agentId`, `endpointId` and
//! `controllerGeneration` together ([`ActingArgs`], required by the agent-only tools
//! `complete_agent_task_attempt` and `register_agent_wait`) — or, where the human owner may act
//! too, names all three or none ([`MaybeActingArgs`]; none: the caller as the human owner).
//! Provenance is in every view: a task's creator (`creatorAgentId`, `null` for the owner as a
//! human), its assignee and goal; an attempt's endpoint, generation and wake; a wait's wake.

mod args;
mod results;

pub use args::*;
pub use results::*;
