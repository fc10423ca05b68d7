//! {{name}}: an ahp agent.
//!
//! Each turn answers every message in the agent's inbox. With a model offered by the host
//! (the operator's policy names one), it runs a small model-and-tools loop: the model sees the
//! snapshot's system prompt, its history and the conversation so far, with the tools of the
//! snapshot's MCP servers, and the host runs the tool calls it asks for. With no model offered,
//! it echoes each message and says so, so the agent answers out of the box.

use ahp_guest::conversations::{self, Author};
use ahp_guest::model::{self, Message};
use ahp_guest::{Agent, agent_loop, snapshot};

/// The most model calls one answer may take (each is paid from the budget).
const STEPS: u32 = 8;

struct MyAgent;

impl Agent for MyAgent {
    /// Activation: the snapshot is there to read; nothing to restore yet.
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        println!("{{name}} resumed transfer {}", snapshot::transfer_id());
        Ok(())
    }

    /// One turn: reply to each message waiting in the inbox (a reply consumes it).
    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let me = conversations::wake().ok_or("a turn without a wake")?.agent_id;
        // The first model the operator offers (its policy's order); none: the agent echoes.
        let model = model::models().into_iter().next().map(|m| m.id);
        // The session this agent continues: the snapshot's user and assistant messages.
        let history: Vec<Message> = match &model {
            None => Vec::new(),
            Some(_) => snapshot::history()?
                .into_iter()
                .filter(|m| matches!(m.role.as_str(), "user" | "assistant") && !m.content.is_empty())
                .map(|m| match m.role.as_str() {
                    "user" => Message::user(&m.content),
                    _ => Message::assistant(&m.content),
                })
                .collect(),
        };
        // One message at a time; a message the model keeps failing on (a provider that
        // hangs, say) is answered with a short notice after two tries, so the next one is
        // answered. The reply consumes the delivery in its own commit.
        conversations::answer(|delivery| {
            let question = delivery.message();
            let Some(model) = &model else {
                return Ok(format!("echo: {} (no model is configured for this agent)", question.body));
            };
            let mut messages = history.clone();
            for m in conversations::transcript(&question.conversation_id) {
                let m = m?;
                if m.seq > question.seq {
                    break;
                }
                messages.push(match &m.author {
                    Author::Agent(id) if *id == me => Message::assistant(&m.body),
                    _ => Message::user(&m.body),
                });
            }
            let request = agent_loop::request_with_tools(model, &snapshot::system_prompt(), messages)?;
            let answer = match agent_loop::run(request, STEPS) {
                Ok(answer) => answer.text,
                Err(agent_loop::Error::StepCap { text, .. }) if !text.is_empty() => text,
                Err(e) => return Err(Box::<dyn std::error::Error>::from(e)),
            };
            println!("answered message {} of {}", question.seq, question.conversation_id);
            Ok(answer)
        })?;
        Ok(())
    }
}

ahp_guest::export_agent!(MyAgent);
