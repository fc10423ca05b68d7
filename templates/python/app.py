"""An ahp agent in Python. Each turn it answers every message waiting in its inbox: with the
operator's model and the tools of its MCP servers when the host offers a model (at most 8
model calls an answer), otherwise with a reply of its own, so it answers out of the box. It
counts the messages it answered in its checkpoint, which outlives a host restart.
"""

from ahp_agent import Agent, agent_loop, checkpoint, conversations, export, model, snapshot

STEPS = 8
"""The most model calls one answer may take."""


class MyAgent(Agent):
    def resume(self):
        # Called once, when the transfer is activated: return to become `active`.
        print(f"resumed {snapshot.transfer_id()} with {snapshot.message_count()} messages")

    def turn(self):
        me = conversations.wake().agent_id
        answered = checkpoint.load_json() or 0
        # The first model the operator offers (its policy's order); none: a reply of our own.
        offered = model.models()

        def respond(delivery):
            nonlocal answered
            question = delivery.message
            if offered:
                answer = think(offered[0].id, me, question)
            else:
                answer = f"#{answered + 1}: you said {question.body!r} (no model is offered to me)"
            answered += 1
            return answer

        # One message at a time; a message the model keeps failing on (a provider that
        # hangs, say) is answered with a short notice after two tries, so the next one is
        # answered. The reply consumes the delivery in its own commit.
        conversations.answer(respond)
        checkpoint.save_json(answered)


def think(model_id, me, question):
    """`model_id`'s answer to `question`, seeing the system prompt, the session's history and
    the conversation so far."""
    messages = [
        model.user(m.content) if m.role == "user" else model.assistant(m.content)
        for m in snapshot.messages()
        if m.role in ("user", "assistant") and m.content
    ]
    for m in conversations.transcript(question.conversation_id):
        if m.seq > question.seq:
            break
        messages.append(model.assistant(m.body) if conversations.is_mine(m, me) else model.user(m.body))
    request = agent_loop.request_with_tools(model_id, snapshot.system_prompt(), messages)
    try:
        return agent_loop.run(request, STEPS).text
    except agent_loop.StepCap as cap:
        return cap.text or "I could not finish thinking about that."


WitWorld = export(MyAgent)
