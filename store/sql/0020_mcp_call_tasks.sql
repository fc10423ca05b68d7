-- MCP tasks of the host's own calls: a task whose work is the host running the tool itself (no
-- message, agent task or activation stands for it), which reports through the row — the input it
-- asks the client for (`input_required`), the answers collected so far, and its outcome (the
-- tool's result, or the error it failed with). store/src/conversation/mcp_task.rs.
--
-- SQLite cannot widen a CHECK in place: the table is rebuilt (nothing refers to it).
CREATE TABLE mcp_tasks_v2 (
    id              TEXT PRIMARY KEY NOT NULL,     -- mtk_…
    owner_principal TEXT NOT NULL,                 -- the creator's communication principal
    tool            TEXT NOT NULL,                 -- the tool whose call it answered
    awaits_kind     TEXT NOT NULL CHECK (awaits_kind IN ('reply', 'agent_task', 'activation', 'call')),
    awaits_id       TEXT NOT NULL,                 -- the question's message, the agent task, the transfer, the task itself
    conversation_id TEXT,                          -- a reply's conversation
    asked_seq       INTEGER,                       -- the question's seq: only a later message answers it
    status          TEXT NOT NULL CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message  TEXT,
    answer_id       TEXT,                          -- what ended it: the reply, the task, the transfer
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    ended_at        INTEGER,
    ends            INTEGER NOT NULL DEFAULT 0,    -- terminal writes: 1 once ended, never more
    input_requests  TEXT,                          -- a call's pending requests to the client: JSON object by key
    input_responses TEXT,                          -- a call's answers collected so far: JSON object by key
    outcome         TEXT                           -- a call's result (completed) or error (failed): JSON object
) STRICT;
INSERT INTO mcp_tasks_v2 (id, owner_principal, tool, awaits_kind, awaits_id, conversation_id, asked_seq, status,
                          status_message, answer_id, created_at, updated_at, expires_at, ended_at, ends)
SELECT id, owner_principal, tool, awaits_kind, awaits_id, conversation_id, asked_seq, status,
       status_message, answer_id, created_at, updated_at, expires_at, ended_at, ends
FROM mcp_tasks;
DROP TABLE mcp_tasks;
ALTER TABLE mcp_tasks_v2 RENAME TO mcp_tasks;
CREATE INDEX mcp_tasks_awaiting ON mcp_tasks (awaits_kind, awaits_id);
CREATE INDEX mcp_tasks_by_conversation ON mcp_tasks (conversation_id, status);
CREATE INDEX mcp_tasks_by_owner ON mcp_tasks (owner_principal, expires_at);
