"""How a refusal of the host (a WIT `result` error) becomes a Python exception.

componentize-py raises `componentize_py_types.Err(value)` where `value` is one case of the
interface's `error` variant, a dataclass named `Error_<Case>` (e.g. `Error_LimitTooLarge`)
with a `value` field when the case has a payload. Each SDK module turns that into its own
exception class whose `kind` is the WIT case name (`"limit-too-large"`), so the kinds are the
WIT's own and cannot drift from it.
"""

import re

from componentize_py_types import Err


class AhpError(Exception):
    """A call the host refused or that failed; `kind` is the WIT error case, `detail` its
    payload (a message, a bound, or None)."""

    def __init__(self, kind, detail=None):
        self.kind = kind
        self.detail = detail
        super().__init__(kind if detail is None else f"{kind}: {_describe(detail)}")


def _describe(detail):
    # A `failure` record (model) carries a message and what the call was charged.
    message = getattr(detail, "message", None)
    if message is not None:
        return f"{message} (charged {getattr(detail, 'charged_micro_usd', 0)} micro-USD)"
    return str(detail)


def kind_of(case):
    """`Error_LimitTooLarge` (an instance) -> `"limit-too-large"`."""
    name = type(case).__name__.removeprefix("Error_").rstrip("_")
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def call(error_class, function, *args):
    """Calls the raw binding `function`, raising `error_class` for a WIT error."""
    try:
        return function(*args)
    except Err as e:
        raise error_class(kind_of(e.value), getattr(e.value, "value", None)) from None
