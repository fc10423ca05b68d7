"""The MCP tools of the servers this agent may reach, called by the host as MCP client: it
adds each server's credential itself and counts every byte against the egress ceiling
(interface `tools`).

    from ahp_agent import tools

    for tool in tools.list_tools():
        print(tool.name, tool.server)
    result = tools.call("get_stock", {"sku": "A-1"})
    print(tools.text_of(result), result.is_error)
"""

import json

from wit_world.imports import model as _model
from wit_world.imports import tools as _raw

from ._errors import AhpError, call as _call

Tool = _raw.Tool
"""One tool: `name`, `description`, `input_schema_json`, `server`."""

CallResult = _raw.CallResult
"""What a call returned: `content`, `structured_json`, `is_error`, `charged_micro_usd`."""


class Error(AhpError):
    """A tool call was refused or failed: `kind` is `"unknown-tool"`, `"invalid-arguments"`,
    `"too-large"`, `"server-error"`, `"unavailable"`, `"refused"` or `"insolvent"` (the budget
    is spent: stop)."""


def list_tools():
    """The tools of every reachable server (at most 256)."""
    return _call(Error, _raw.list)


def definition(tool):
    """`tool` as a `model.ToolDefinition`, ready for a request."""
    return _model.ToolDefinition(tool.name, tool.description, tool.input_schema_json)


def call(name, arguments):
    """Calls tool `name` with `arguments` (a dict, sent as a JSON object)."""
    return call_json(name, json.dumps(arguments))


def call_json(name, arguments_json):
    """Calls tool `name` with `arguments_json` (a JSON object as text)."""
    return _call(Error, _raw.call, name, arguments_json)


def text_of(result):
    """The result as text for a model: its text items, each other item described in a line
    (`[image image/png, 1024 bytes]`), else its structured content."""
    lines = []
    for item in result.content:
        value = item.value
        if isinstance(item, _raw.Content_Text):
            lines.append(value)
        elif isinstance(item, _raw.Content_Image):
            lines.append(f"[image {value.mime_type}, {len(value.data)} bytes]")
        elif isinstance(item, _raw.Content_Audio):
            lines.append(f"[audio {value.mime_type}, {len(value.data)} bytes]")
        elif isinstance(item, _raw.Content_EmbeddedResource):
            lines.append(value.text if value.text is not None else f"[resource {value.uri}]")
        elif isinstance(item, _raw.Content_ResourceLink):
            lines.append(f"[link {value}]")
    if not lines:
        return result.structured_json or ""
    return "\n".join(lines)
