//! Which scope each tool of `/mcp/conversations` needs: `communication:read` for the tools
//! that only read, `communication:manage` for every other (the router's gate checks it before
//! the call).

use ahp_store::ApiScope;

/// The delegation tools that only read (and so need `communication:read`).
pub const DELEGATION_READ_TOOLS: [&str; 4] = ["list_agent_tasks", "get_agent_task", "read_agent_wait", "get_goal"];

/// The tools that only read (and so need `communication:read`); every other conversation tool
/// needs `communication:manage`.
pub const READ_TOOLS: [&str; 4] = [
    "list_agent_identities",
    "list_conversations",
    "read_conversation",
    "list_agent_inbox",
];

/// The MCP App cards' tools that only read, or record only a View's observation (and so need
/// `communication:read`): presenting a card, the continuation card's heartbeat, the Goal Plan
/// card's observation.
pub const APP_READ_TOOLS: [&str; 4] = [
    "present_agent_continuation",
    "agent_continuation_state",
    "present_goal_plan",
    "goal_plan_observe",
];

/// The scope a `tools/call` of `tool` on `/mcp/conversations` needs. An unknown name needs
/// `communication:manage` (rmcp then refuses the call).
pub fn required_scope(tool: &str) -> ApiScope {
    if READ_TOOLS.contains(&tool) || DELEGATION_READ_TOOLS.contains(&tool) || APP_READ_TOOLS.contains(&tool) {
        ApiScope::CommunicationRead
    } else {
        ApiScope::CommunicationManage
    }
}
