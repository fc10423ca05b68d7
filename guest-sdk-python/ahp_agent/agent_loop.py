"""The agent loop: the model thinks, asks for tool calls, the host runs them over MCP, their
results go back to the model, until the model answers or a step cap is reached.

    from ahp_agent import agent_loop, model

    request = agent_loop.request_with_tools("default", "You help with stock.", [model.user("How many A-1?")])
    answer = agent_loop.run(request, max_steps=8)
    print(answer.text, answer.steps)

A tool that fails or that the host refuses to call is handed back to the model as an error
result, so the model can recover; only a spent budget (kind `"insolvent"`) or a failed model
call ends the loop with an exception.
"""

from dataclasses import dataclass, field

from . import model, tools


@dataclass
class Answer:
    """What the loop ended with."""

    text: str
    steps: int
    tool_calls: int
    charged_micro_usd: int
    messages: list = field(default_factory=list)


class StepCap(Exception):
    """The model still asked for tools after `steps` calls; `text` is what it last wrote."""

    def __init__(self, steps, text):
        self.steps = steps
        self.text = text
        super().__init__(f"the model still called tools after {steps} steps")


def request_with_tools(model_id, system, messages):
    """A request to `model_id` offering every tool of the agent's reachable servers."""
    definitions = [tools.definition(t) for t in tools.list_tools()]
    return model.Request(model_id, system, messages, tools=definitions)


def run(request, max_steps):
    """Runs the loop on `request` for at most `max_steps` model calls. Raises `model.Error`,
    `tools.Error` (insolvent only) or `StepCap`."""
    tool_calls, charged = 0, 0
    for step in range(1, max_steps + 1):
        completion = model.complete(request)
        charged += completion.charged_micro_usd
        calls = model.tool_calls_of(completion)
        text = model.text_of(completion)
        request.messages.append(model.Message(model.Role.ASSISTANT, completion.parts))
        if not calls:
            return Answer(text, step, tool_calls, charged, request.messages)
        if step == max_steps:
            raise StepCap(max_steps, text)
        results = []
        for c in calls:
            tool_calls += 1
            try:
                result = tools.call_json(c.name, c.arguments_json)
                charged += result.charged_micro_usd
                content, is_error = tools.text_of(result), result.is_error
            except tools.Error as e:
                if e.kind == "insolvent":
                    raise
                content, is_error = str(e), True
            results.append(model.ToolResultPart(model.ToolResult(c.id, content, is_error)))
        request.messages.append(model.Message(model.Role.USER, results))
    raise StepCap(max_steps, "")
