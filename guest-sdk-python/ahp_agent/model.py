"""The operator's models, called by the host's gateway with the operator's credential, which
never enters the sandbox; each call is reserved against the budget, then charged from the
provider's usage (interface `model`).

    from ahp_agent import model

    request = model.Request("default", "You are terse.", [model.user("Hello?")])
    try:
        completion = model.complete(request)
        print(model.text_of(completion), completion.charged_micro_usd)
    except model.Error as e:
        if e.kind == "insolvent":
            ...  # the budget is spent: stop
"""

from wit_world.imports import model as _raw

from ._errors import AhpError, call

Role = _raw.Role
ToolCall = _raw.ToolCall
ToolResult = _raw.ToolResult
ToolDefinition = _raw.ToolDefinition
Text = _raw.Part_Text
ToolCallPart = _raw.Part_ToolCall
ToolResultPart = _raw.Part_ToolResult
Message = _raw.Message
Completion = _raw.Completion
ModelInfo = _raw.ModelInfo
Reservation = _raw.Reservation
StopReason = _raw.StopReason
AUTO = _raw.ToolChoice_Auto()
"""The model decides whether to call tools (the default)."""


class Error(AhpError):
    """A model call was refused or failed: `kind` is `"unknown-model"`, `"invalid-request"`,
    `"too-large"`, `"insufficient-budget"` (detail: the shortfall), `"rate-limited"`,
    `"provider-error"`, `"unavailable"` (detail: a failure with `message` and
    `charged_micro_usd`) or `"insolvent"` (the budget is spent: stop)."""


def Request(model, system, messages, tools=(), max_output_tokens=None, tool_choice=AUTO):  # noqa: N802
    """A completion request for `model` (an id of `models()`, or `"default"`)."""
    return _raw.Request(model, system, list(messages), list(tools), tool_choice, max_output_tokens)


def user(text):
    """A user message of one text part."""
    return Message(Role.USER, [Text(text)])


def assistant(text):
    """An assistant message of one text part."""
    return Message(Role.ASSISTANT, [Text(text)])


def models():
    """The models this agent may call, in the operator's order."""
    return _raw.models()


def complete(request):
    """Calls the model; returns a `Completion` (`parts`, `stop_reason`, `usage`,
    `charged_micro_usd`, `budget`)."""
    return call(Error, _raw.complete, request)


def estimate(request):
    """What `complete(request)` would reserve now, without calling the provider."""
    return call(Error, _raw.estimate, request)


def text_of(completion):
    """The completion's text parts, concatenated."""
    return "".join(p.value for p in completion.parts if isinstance(p, Text))


def tool_calls_of(completion):
    """The tool calls the completion asks for, in order."""
    return [p.value for p in completion.parts if isinstance(p, ToolCallPart)]
