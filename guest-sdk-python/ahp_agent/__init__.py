"""`ahp_agent`: what an agent author imports to write an ahp agent in Python.

An ahp agent is a WebAssembly component that an ahp host resumes inside a metered sandbox
after a session was transferred to it, then keeps running: people and other agents post to
it, and the host runs one conversation *turn* in the sandbox each time messages wait for it.
This package hides the raw bindings componentize-py generates from world `ahp:agent/agent`
(`wit/agent.wit`) and offers the same modules as the Rust SDK (`ahp-guest`):

- `snapshot`: the session being continued: prompt, history (paged for you), tool state, MCP
  servers;
- `credentials`: resolve the credential references of those servers through the host's vault;
- `model`: think with the operator's models through the host's gateway (no key in the
  sandbox);
- `tools`: the MCP tools of those servers, called by the host as MCP client;
- `agent_loop`: model -> tool calls -> results -> model, with a step cap;
- `metering`: the budget, and spend the host cannot see;
- `checkpoint`: durable working memory, as bytes or JSON;
- `conversations`: the turn's wake, its inbox (paged for you), transcripts, replies;
- `delegation`: tasks for other agents of the same owner, waits on them, goals;
- `Agent` and `export`, which make a class the component's entry point.

An agent that answers every message it is sent, counting them in its checkpoint::

    from ahp_agent import Agent, checkpoint, conversations, export

    class Echo(Agent):
        def turn(self):
            answered = checkpoint.load_json() or 0
            for delivery in conversations.inbox(limit=conversations.MAX_REPLIES):
                answered += 1
                delivery.reply(f"#{answered}: {delivery.message.body}")
                delivery.consume()
            checkpoint.save_json(answered)

    WitWorld = export(Echo)

Build it with `componentize-py -d wit -w agent componentize app -o agent.wasm` (app.py
beside this package and `wit/agent.wit`).

Every refusal of the host is raised as the module's `Error` (a subclass of `AhpError`) whose
`kind` is the WIT error case (`"limit-too-large"`, `"insolvent"`, ...).
"""

import traceback

from componentize_py_types import Err

from ._errors import AhpError

__all__ = ["Agent", "AhpError", "export"]


class Agent:
    """An agent: the code the host runs when it activates a transfer, then at each turn.

    Override `resume` (called once per activation; return to make the transfer `active`,
    raise to fail the activation) and `turn` (called when messages wait in the inbox; after a
    host restart in a fresh sandbox without `resume` first, so keep what a turn needs in
    `checkpoint`). Both default to doing nothing. An exception's text is recorded for the
    orchestrator (resume) or the host's operator (turn); its traceback goes to the sandbox's
    log.
    """

    def resume(self):
        """Continues the session. The default does nothing."""

    def turn(self):
        """One conversation turn. The default does nothing: the inbox waits."""


def export(agent_class):
    """The class componentize-py wants as `WitWorld` in the app module, running
    `agent_class` (an `Agent` subclass): `WitWorld = export(MyAgent)`.

    One instance of `agent_class` lives as long as the sandbox; an exception from `resume` or
    `turn` becomes the export's `err` with the exception's text.
    """
    import wit_world

    holder = {}

    def instance():
        if "agent" not in holder:
            holder["agent"] = agent_class()
        return holder["agent"]

    def run(method):
        try:
            getattr(instance(), method)()
        except Exception as e:  # noqa: BLE001 - every failure becomes the export's `err`
            traceback.print_exc()
            raise Err(f"{type(e).__name__}: {e}") from None

    class WitWorld(wit_world.WitWorld):
        def resume(self):
            run("resume")

        def turn(self):
            run("turn")

    WitWorld.__name__ = WitWorld.__qualname__ = "WitWorld"
    return WitWorld
