"""A general agent that continues its transferred session, in Python: the twin of the Rust
`assistant` example. For each delivery of a turn it hands the model its system prompt, the
snapshot's history and the conversation so far, with the tools of its MCP servers; it runs
the tool calls the model asks for (at most 8 model calls), replies with the model's answer
(or, should the model never stop calling tools, with its last text), which consumes the
delivery; a question it cannot answer after two tries gets a short failure notice instead. The model is the snapshot's `toolState.model`, else `default`.

Build: componentize-py -d ../../wit/agent.wit -w agent componentize app \
           -p . -p ../../guest-sdk-python -o python_assistant.wasm
"""

from ahp_agent import Agent, agent_loop, conversations, export, model, snapshot

STEPS = 8
"""The most model calls one answer may take."""


class Assistant(Agent):
    def turn(self):
        wake = conversations.wake()
        if wake is None:
            raise RuntimeError("a turn without a wake")
        model_id = snapshot.tool_state_at("/model", default="default")
        if not isinstance(model_id, str):
            model_id = "default"
        history = [
            model.user(m.content) if m.role == "user" else model.assistant(m.content)
            for m in snapshot.messages()
            if m.role in ("user", "assistant") and m.content
        ]
        def respond(delivery):
            question = delivery.message
            messages = list(history)
            for m in conversations.transcript(question.conversation_id):
                if m.seq > question.seq:
                    break
                mine = conversations.is_mine(m, wake.agent_id)
                messages.append(model.assistant(m.body) if mine else model.user(m.body))
            request = agent_loop.request_with_tools(model_id, snapshot.system_prompt(), messages)
            try:
                return agent_loop.run(request, STEPS).text
            except agent_loop.StepCap as cap:
                if not cap.text:
                    raise
                return cap.text

        # A question the model keeps failing on gets a short notice after two tries, so one
        # bad question never keeps it from the next.
        conversations.answer(respond)


WitWorld = export(Assistant)
