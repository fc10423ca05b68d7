//! The whole agent loop through the real host: `examples/assistant` (the SDK's `agent_loop`)
//! answers a posted question with a model behind the host's gateway — the scripted local
//! provider, speaking OpenAI Chat Completions (`tool_calls`) and Anthropic Messages (`tool_use`
//! blocks) — and the `inventory` tool of a real MCP server on loopback, called by the host with
//! the credential it injects.
//!
//! For each provider: the question → the model asks for the tool → the host calls it over MCP
//! with the injected credential → the model's final answer is the agent's reply; the provider
//! saw the system prompt, the history and the question, then the tool's result; neither secret
//! ever reached the guest; the model and tool calls are charged and audited.

use crate::common;

use ahp_guests::ASSISTANT;
use ahp_host::gateway::scripted::Protocol;
use common::assistant::{self, a_question_is_answered_with_a_tool_over_mcp};

#[test]
fn openai_a_question_is_answered_with_a_tool_over_mcp() {
    a_question_is_answered_with_a_tool_over_mcp(ASSISTANT, "openai", Protocol::Openai);
}

#[test]
fn anthropic_a_question_is_answered_with_a_tool_over_mcp() {
    a_question_is_answered_with_a_tool_over_mcp(ASSISTANT, "claude", Protocol::Anthropic);
}

#[test]
fn a_question_the_provider_always_fails_on_never_silences_the_assistant() {
    assistant::a_question_the_provider_always_fails_on_never_silences_the_assistant(ASSISTANT);
}

#[test]
fn a_model_that_never_stops_calling_tools_is_cut_at_eight_steps_and_the_agent_answers_on() {
    assistant::a_model_that_never_stops_calling_tools_is_cut_at_eight_steps_and_the_agent_answers_on(ASSISTANT);
}
