//! A general agent that continues its transferred session. For each delivery of a turn it
//! hands the model its system prompt, the snapshot's history and the conversation so far,
//! with the tools of its MCP servers; it runs the tool calls the model asks for (at most 8
//! model calls) and replies with the model's answer (the reply consumes the delivery). A
//! question it cannot answer after two tries (its model call keeps failing) gets a short
//! failure notice instead, so one bad question never keeps it from the next. The model is the
//! snapshot's `toolState.model`, else `default`.

use ahp_guest::agent_loop;
use ahp_guest::conversations::{self, Author};
use ahp_guest::model::Message;
use ahp_guest::{Agent, snapshot};

/// The most model calls one answer may take.
const STEPS: u32 = 8;

struct Assistant;

impl Agent for Assistant {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }

    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let me = conversations::wake().ok_or("a turn without a wake")?.agent_id;
        let model = snapshot::tool_state_at::<String>("/model").unwrap_or_else(|_| "default".into());
        let history: Vec<Message> = snapshot::history()?
            .into_iter()
            .filter(|m| matches!(m.role.as_str(), "user" | "assistant") && !m.content.is_empty())
            .map(|m| {
                if m.role == "user" {
                    Message::user(&m.content)
                } else {
                    Message::assistant(&m.content)
                }
            })
            .collect();
        // One delivery at a time: an answer is the model's text (or, should it never stop
        // calling tools, its last text). A question the model keeps failing on is answered
        // with a short notice after its tries, so the next question is answered.
        conversations::answer(|delivery| {
            let question = delivery.message();
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
            let request = agent_loop::request_with_tools(&model, &snapshot::system_prompt(), messages)?;
            match agent_loop::run(request, STEPS) {
                Ok(answer) => Ok(answer.text),
                Err(agent_loop::Error::StepCap { text, .. }) if !text.is_empty() => Ok(text),
                Err(e) => Err(Box::<dyn std::error::Error>::from(e)),
            }
        })?;
        Ok(())
    }
}

ahp_guest::export_agent!(Assistant);
