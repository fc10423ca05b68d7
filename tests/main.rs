//! End-to-end tests: they drive the real `ahp` binary the way an operator or orchestrator does.
//!
//! One integration binary; its modules are the table of contents.

mod agents;
mod authors;
mod browser;
mod cli;
mod common;
mod console;
mod console_conversations;
mod console_delegation;
mod crash;
mod delegation;
mod host_held;
mod hosts;
mod http_limits;
mod mcp_apps;
mod mcp_conversations;
mod mcp_delegation;
mod mcp_http;
mod mcp_routes;
mod mcp_stdio;
mod mcp_tasks;
