"""The agent's durable working memory: one blob per transfer, kept by the host across turns
and sandbox restarts (interface `checkpoint`). The tier bounds its size.

    from ahp_agent import checkpoint

    state = checkpoint.load_json() or {"answered": 0}
    state["answered"] += 1
    checkpoint.save_json(state)
"""

import json

from wit_world.imports import checkpoint as _raw

from ._errors import AhpError, call

class Error(AhpError):
    """A checkpoint call was refused: `kind` is `"too-large"` (detail: the bound) or
    `"unavailable"`."""


def save_bytes(state):
    """Replaces the saved state with `state` (bytes)."""
    call(Error, _raw.save, bytes(state))


def load_bytes():
    """The last saved state, or None if nothing was saved yet."""
    state = call(Error, _raw.load)
    return None if state is None else bytes(state)


def save_json(value):
    """Saves `value` as compact JSON."""
    save_bytes(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def load_json():
    """The saved state parsed as JSON, or None if nothing was saved yet."""
    state = load_bytes()
    return None if state is None else json.loads(state)
