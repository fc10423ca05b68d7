"""The transfer's budget, and spend the host cannot see for itself (interface `metering`).

CPU, model calls (`model`) and tool calls (`tools`) are charged by the host; report only
spend such as a paid API reached through `wasi:http`.

    from ahp_agent import metering

    left = metering.budget().remaining_micro_usd
    metering.report("search_api", 1_500)  # 0.0015 USD
"""

from wit_world.imports import metering as _raw

from ._errors import AhpError, call

Budget = _raw.BudgetState
"""A budget in integer micro-USD: `allocated_micro_usd`, `spent_micro_usd`,
`remaining_micro_usd`, `fuel_left_this_turn`."""

class Error(AhpError):
    """A report was refused: `kind` is `"invalid-kind"`, `"invalid-amount"` or `"insolvent"`
    (the spend reached the allocation: stop)."""


def report(kind, micro_usd):
    """Records `micro_usd` of spend of `kind` and returns the budget after it."""
    return call(Error, _raw.report, kind, micro_usd)


def budget():
    """The budget as it stands now."""
    return _raw.budget()
