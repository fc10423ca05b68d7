"""A worker other agents of its owner hand tasks to, in Python: the twin of the Rust `worker`
example (see `examples/coordinator`), built on `ahp_agent.delegation`.

Each turn it does every task assigned to it whose attempt is active -- the one its task-attempt
wake names first, then any other that coalesced into the same wake -- by running its job on the
task's instructions, and hands the result in with `complete_attempt`. The job is deterministic,
so a test can check a result byte for byte, and the same as the Rust worker's:

- `count` (the default): `count: <n> words, <m> letters` (letters are alphabetic characters);
- `reverse`: `reverse: ` and the instruction's words in reverse order, one space apart.

The tool state chooses it: `{"job": "count" | "reverse"}`. A human who messages the worker
directly gets the job's result on the message as a reply; messages from agents are consumed
unanswered (two agents never answer each other forever). A turn the host runs again changes
nothing: an attempt no longer active is skipped, and a task cancelled while it worked is
refused (kind `"refused"`), which it ignores.
"""

from ahp_agent import Agent, conversations, delegation, export, snapshot

JOBS = ("count", "reverse")


def job():
    """The job the tool state names (`count` when it names none)."""
    state = snapshot.tool_state_json()
    name = state.get("job", "count") if isinstance(state, dict) else "count"
    if name not in JOBS:
        raise ValueError(f"tool state: job {name!r} is not one of {', '.join(JOBS)}")
    return name


def run(name, text):
    """The job's result on `text`, within a result's bound."""
    if name == "count":
        out = f"count: {len(text.split())} words, {sum(c.isalpha() for c in text)} letters"
    else:
        out = "reverse: " + " ".join(reversed(text.split()))
    data = out.encode("utf-8")[: delegation.MAX_TEXT_BYTES]
    return data.decode("utf-8", errors="ignore")


class Worker(Agent):
    def resume(self):
        job()  # fail the activation early on a tool state it cannot follow

    def turn(self):
        name = job()
        for delivery in conversations.inbox(limit=conversations.MAX_REPLIES):
            if isinstance(delivery.message.author, conversations.Human):
                delivery.reply(run(name, delivery.message.body))
            delivery.consume()

        # The task the wake names, then every other assigned task with an active attempt
        # (causes coalesce: a wake's origin names only the first).
        work = []
        assigned = delegation.assigned_task()
        if assigned is not None:
            work.append(assigned)
        for task in delegation.tasks(delegation.TaskRole.ASSIGNED, delegation.TaskState.RUNNING):
            attempt = task.current_attempt
            if attempt is not None and attempt.state == delegation.AttemptState.ACTIVE:
                if all(a != attempt.id for _, a in work):
                    work.append((task, attempt.id))
        # Each hand-in is one write; the rest wait for a later turn.
        for task, attempt in work[: delegation.MAX_WRITES]:
            try:
                delegation.complete_attempt(attempt, delegation.SUCCEEDED, run(name, task.instructions))
            except delegation.Error as e:
                if e.kind != "refused":  # refused: cancelled while it worked
                    raise


WitWorld = export(Worker)
