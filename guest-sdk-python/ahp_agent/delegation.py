"""Delegation: hand work to other agents of the same owner and sleep until it is done
(interface `delegation`).

A coordinating turn creates a `Task` for another agent with `create_task` (its first attempt
starts at once and wakes the assignee), registers a one-shot wait over the tasks with
`register_wait` (`ANY` or `ALL`, 1 to `MAX_SOURCES` of them), and ends. When the wait's
condition holds the host runs one turn whose wake origin is the wait; `fired_wait` reads it,
and `get_task` each task's result.

The assignee's turn runs with a task-attempt origin: `assigned_task` reads the task and its
active attempt, and `complete_attempt` finishes it with a result, which becomes the task's.

`create_goal`, `checkpoint_goal` and `complete_goal` keep durable workflow truth (a fixed
completion intent, a plan changed only by revision-fenced checkpoints); the goal's controller
gets an attention-event wake when a task of the goal ends (`get_attention_event`).

Every call needs a conversation turn (kind `"no-wake"` outside one). The writes that create
something take their identity from the turn's wake, so a turn the host ever runs again
resolves to what it already created instead of creating it twice. One turn makes at most
`MAX_CALLS` calls, `MAX_WRITES` of them writes (kind `"too-many-calls"`).

A coordinator's two turns::

    from ahp_agent import checkpoint, delegation

    wait = delegation.fired_wait()
    if wait is None:
        task = delegation.create_task(delegation.NewTask("agt_worker", "count words", "one two"))
        wait = delegation.register_wait([task.id], delegation.ALL)
        checkpoint.save_json({"waiting": wait.id})
    else:
        for source in wait.sources:
            task = delegation.get_task(source.task_id)
            print(task.title, task.result)

And the worker's::

    assigned = delegation.assigned_task()
    if assigned is not None:
        task, attempt = assigned
        words = len(task.instructions.split())
        try:
            delegation.complete_attempt(attempt, delegation.SUCCEEDED, f"{words} words")
        except delegation.Error as e:
            if e.kind != "refused":  # refused: the task was cancelled meanwhile
                raise
"""

from wit_world.imports import conversations as _conversations
from wit_world.imports import delegation as _raw

from ._errors import AhpError, call
from ._pages import pages

Task = _raw.Task
"""Planned work for one agent: `id`, `creator`, `assignee`, `goal_id`, `title`,
`instructions`, `state`, `result`, `attempt_count`, `current_attempt`, `created_at_micros`,
`terminal_at_micros`."""

Attempt = _raw.Attempt
"""One execution of a task: `id`, `task_id`, `number`, `state`, `wake_id`, ..."""

TaskState = _raw.TaskState
"""`OPEN`, `RUNNING`, `SUCCEEDED`, `FAILED`, `CANCELLED`."""

AttemptState = _raw.AttemptState
"""`ACTIVE`, `SUCCEEDED`, `FAILED`, `CANCELLED`, `REVOKED`, `DELIVERY_UNKNOWN`."""

TaskRole = _raw.TaskRole
"""`ASSIGNED` (tasks given to this agent) or `CREATED` (tasks it gave)."""

Outcome = _raw.Outcome
"""How an attempt ended: `SUCCEEDED` or `FAILED`."""

WaitMode = _raw.WaitMode
"""`ANY` (fires at the first task's end) or `ALL` (at the last's)."""

WaitState = _raw.WaitState
"""`WAITING`, `TRIGGERED`, `CANCELLED`."""

Wait = _raw.Wait
"""A one-shot wait: `id`, `goal_id`, `mode`, `state`, `sources` (each a `WaitSource`:
`task_id`, `task_state`, `matched_at_micros`), `wake_id`, ..."""

WaitSource = _raw.WaitSource

Goal = _raw.Goal
"""Durable workflow truth: `id`, `creator`, `controller`, `title`, `completion_intent`,
`plan`, `note`, `revision`, `state`, `created_at_micros`."""

GoalState = _raw.GoalState
"""`ACTIVE`, `COMPLETED`, `ABANDONED`."""

PlanStep = _raw.PlanStep
"""One step of a goal's plan: `PlanStep(title, StepStatus.PENDING)`."""

StepStatus = _raw.StepStatus
"""`PENDING`, `IN_PROGRESS`, `DONE`, `SKIPPED`."""

NewGoal = _raw.NewGoal
"""A goal to create: `NewGoal(title, completion_intent, plan, controller)` (`controller`:
an `agt_...` id or None for this agent)."""

AttentionEvent = _raw.AttentionEvent
"""A task of a goal ended: `id`, `goal_id`, `task_id`, `attempt_id`, `task_state`, ..."""

ANY = WaitMode.ANY
ALL = WaitMode.ALL
SUCCEEDED = Outcome.SUCCEEDED
FAILED = Outcome.FAILED

MAX_SOURCES = 8
"""The most tasks one wait may be over (the host's bound)."""

MAX_PAGE = 64
"""The largest page `list_tasks_page` accepts (the host's bound)."""

MAX_CALLS = 1024
"""The most delegation calls one turn may make (the host's bound)."""

MAX_WRITES = 64
"""The most delegation writes (creating, finishing, cancelling, checkpointing) one turn may
make (the host's bound): a coordinator fanning out to `n` workers per question, plus one wait,
handles at most `MAX_WRITES // (n + 1)` questions in one turn."""

MAX_TEXT_BYTES = 64 * 1024
"""The largest instructions and result texts, in UTF-8 bytes (the host's bound)."""

_TERMINAL = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED)


class Error(AhpError):
    """A delegation call was refused: `kind` is `"no-wake"` (not in a turn), `"not-found"`,
    `"invalid"` (detail: the rule broken), `"limit-too-large"` (detail: the largest page),
    `"revision-conflict"` (detail: the goal's current revision), `"refused"` (detail: why),
    `"too-many-calls"` (detail: the bound) or `"unavailable"`."""


def NewTask(assignee, title, instructions, goal_id=None):  # noqa: N802 - reads as the WIT record
    """A task for `assignee` (`agt_...`) titled `title` asking `instructions`, in goal `goal_id`
    (`goal_...`) or outside any goal."""
    return _raw.NewTask(assignee, title, instructions, goal_id)


def is_terminal(state):
    """Whether a task in `state` has ended (`SUCCEEDED`, `FAILED` or `CANCELLED`): no attempt
    will change it again."""
    return state in _TERMINAL


def create_task(task):
    """Creates `task` (a `NewTask`) for another agent of the same owner and starts its first
    attempt, which wakes the assignee. Should this turn run again, the same call returns the
    same task."""
    return call(Error, _raw.create_task, task)


def get_task(task_id):
    """The task `task_id` (`tsk_...`), as this agent may see it."""
    return call(Error, _raw.get_task, task_id)


def _wake():
    wake = _conversations.current_wake()
    if wake is None:
        raise Error("no-wake")
    return wake


def assigned_task():
    """For a turn woken by a task attempt: `(task, attempt_id)` to work on and finish. None
    when this turn runs for anything else, or when the attempt is no longer active (its task
    was cancelled, or a crash left its delivery unknown): there is nothing to hand in."""
    origin = _wake().origin
    if not isinstance(origin, _conversations.WakeOrigin_AgentTaskAttempt):
        return None
    task = get_task(origin.value)
    attempt = task.current_attempt
    if attempt is None or attempt.state != AttemptState.ACTIVE:
        return None
    return task, attempt.id


def list_tasks_page(role, state=None, after=None, limit=MAX_PAGE):
    """One page of this agent's tasks in `role`, optionally only those in `state`, in id order
    after the task `after` (exclusive; None starts at the beginning), at most `limit`."""
    return call(Error, _raw.list_tasks, role, state, after, limit)


def tasks(role, state=None):
    """All of this agent's tasks in `role` (optionally only those in `state`), in id order,
    fetched `MAX_PAGE` at a time as you iterate. Ids only move forward: a page whose last id
    does not pass the cursor ends the read unserved, so no task is handed out twice."""
    return pages(
        lambda after: list_tasks_page(role, state, after, MAX_PAGE),
        None,
        lambda after, page: page[-1].id,
        serve_repeated=False,
    )


def complete_attempt(attempt_id, outcome, result):
    """Finishes this agent's active attempt `attempt_id` (`tka_...`) with `outcome` and
    `result` (at most `MAX_TEXT_BYTES`) and returns the task, now succeeded or failed.
    Finishing it again with the same outcome and result returns the task unchanged."""
    return call(Error, _raw.complete_attempt, attempt_id, outcome, result)


def cancel_task(task_id):
    """Cancels a task this agent created (or whose goal it controls), with its active attempt.
    Cancelling a cancelled task changes nothing."""
    return call(Error, _raw.cancel_task, task_id)


def register_wait(sources, mode, goal_id=None):
    """Registers a wait of this agent over `sources` (1 to `MAX_SOURCES` distinct task ids):
    `ANY` fires at the first task's end, `ALL` at the last's. It fires exactly one turn, with
    wake origin wait and the returned wait's id -- at once (after this turn) if its condition
    already holds. Scoped to goal `goal_id`, the tasks' ends wake this agent through the wait
    instead of the goal controller's attention events."""
    return call(Error, _raw.register_wait, list(sources), mode, goal_id)


def read_wait(wait_id):
    """The wait `wait_id` (`wait_...`): its state and its tasks' states."""
    return call(Error, _raw.read_wait, wait_id)


def fired_wait():
    """For a turn woken by a wait: the wait that fired; None when this turn runs for anything
    else. (Causes coalesce into one wake and its origin is the first: a turn that also has
    waits of its own pending should read them with `read_wait` whatever the origin.)"""
    origin = _wake().origin
    if not isinstance(origin, _conversations.WakeOrigin_Wait):
        return None
    return read_wait(origin.value)


def cancel_wait(wait_id):
    """Cancels a waiting wait: it will not fire. Cancelling a cancelled one changes nothing."""
    return call(Error, _raw.cancel_wait, wait_id)


def create_goal(goal):
    """Creates `goal` (a `NewGoal`), with this agent as its creator."""
    return call(Error, _raw.create_goal, goal)


def get_goal(goal_id):
    """The goal `goal_id` (`goal_...`)."""
    return call(Error, _raw.get_goal, goal_id)


def checkpoint_goal(goal_id, expected_revision, plan, note):
    """Replaces the plan and note of an active goal if its revision is still
    `expected_revision`, and returns the goal at its next revision; kind
    `"revision-conflict"` (detail: the current revision) if it moved on."""
    return call(Error, _raw.checkpoint_goal, goal_id, expected_revision, list(plan), note)


def complete_goal(goal_id):
    """Completes an active goal this agent created or controls. Completing a completed goal
    changes nothing."""
    return call(Error, _raw.complete_goal, goal_id)


def attention_event():
    """For a turn woken by an attention event: the event (which task of which goal ended and
    how); None when this turn runs for anything else."""
    origin = _wake().origin
    if not isinstance(origin, _conversations.WakeOrigin_AttentionEvent):
        return None
    return get_attention_event(origin.value)


def get_attention_event(event_id):
    """The attention event `event_id`."""
    return call(Error, _raw.get_attention_event, event_id)
