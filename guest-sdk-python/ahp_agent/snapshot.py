"""Read-only access to the session this agent resumes: its prompt, history, tool state and
MCP servers (interface `snapshot`).

    from ahp_agent import snapshot

    for message in snapshot.messages():
        print(message.role, len(message.content))
    model = snapshot.tool_state_at("/model", default="default")
"""

import json

from wit_world.imports import snapshot as _raw

from ._errors import AhpError, call
from ._pages import pages

Message = _raw.Message
"""One message of the history: `role`, `content`."""

McpServer = _raw.McpServer
"""An MCP server of the session: `server` (its URL), `cred_ref` (a credential reference)."""

MAX_PAGE = 256
"""The largest page `messages_page` accepts (the host's bound)."""


class Error(AhpError):
    """A snapshot read was refused; `kind` is `"limit-too-large"` (detail: the largest page)."""


def transfer_id():
    """The transfer this sandbox continues (`tr_...`)."""
    return _raw.transfer_id()


def system_prompt():
    """The source session's system prompt."""
    return _raw.system_prompt()


def message_count():
    """How many messages the history holds."""
    return _raw.message_count()


def messages_page(after, limit):
    """One page of the history: at most `limit` (at most `MAX_PAGE`) messages from position
    `after` (0-based). Raises `Error` above `MAX_PAGE`."""
    return call(Error, _raw.messages, after, limit)


def messages():
    """The whole history, oldest first, read a page at a time as you iterate."""
    return pages(
        lambda after: messages_page(after, MAX_PAGE),
        0,
        lambda after, page: after + len(page),
    )


def history():
    """The whole history as a list."""
    return list(messages())


def tool_state():
    """The source session's tool state, as JSON text (at most 1 MiB)."""
    return _raw.tool_state()


def tool_state_json():
    """The tool state parsed (`json.loads`); raises `ValueError` if it is not JSON."""
    return json.loads(_raw.tool_state())


_MISSING = object()


def tool_state_at(pointer, default=_MISSING):
    """The value at JSON pointer `pointer` (RFC 6901, e.g. `"/model"`) of the tool state;
    `default` when it is absent (else `KeyError`)."""
    value = tool_state_json()
    if pointer:
        for token in pointer.lstrip("/").split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            try:
                value = value[int(token)] if isinstance(value, list) else value[token]
            except (KeyError, IndexError, ValueError, TypeError):
                if default is _MISSING:
                    raise KeyError(pointer) from None
                return default
    return value


def mcp_servers():
    """The MCP servers the source session used (at most 32)."""
    return _raw.mcp_servers()
