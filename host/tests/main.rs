//! The host's tests against its library: real guests in real sandboxes over a real store, one
//! binary, a module per area (the end-to-end tests through the `ahp` binary are `tests/`, the
//! `e2e` binary). `cargo test -p ahp-host --test host MODULE::` runs one area.
//!
//! - [`sandbox`]: activation end to end, and each hostile guest stopped by the right ceiling
//!   with its audit event (CPU, memory, wall clock, host resources, egress, RSS bounds);
//! - [`turns`]: conversation turns through the controller: replies, parking, fairness and
//!   admission, the lease fence, moves, lost agents, aliased guest arguments;
//! - [`no_silent_death`]: transient store faults at every step of a turn, restarts and kills:
//!   an agent never silenced, a message never answered twice;
//! - [`model_gateway`]: `ahp:agent/model` against the scripted provider: exact charges,
//!   budgets, hostile providers, bounds;
//! - [`mcp_tools`]: the host as MCP client (`ahp:agent/tools`) of a real server, and through a
//!   guest;
//! - [`agent_loop`]: `examples/assistant`, model and tool together, both provider protocols;
//! - [`python`]: the Python SDK's guests, the assistant and the hostile ones;
//! - [`sdk_hygiene`]: the guest SDK's copies of the host's constants and error enums;
//! - [`common`]: the scenarios and probes more than one area shares.

mod common;

mod agent_loop;
mod mcp_tools;
mod model_gateway;
mod no_silent_death;
mod python;
mod sandbox;
mod sdk_hygiene;
mod turns;
