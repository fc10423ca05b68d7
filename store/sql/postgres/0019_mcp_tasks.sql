-- PostgreSQL counterpart of store/sql/0019_mcp_tasks.sql: the same table, columns, constraints and
-- indexes (SQLite INTEGER -> BIGINT).

-- MCP tasks (the tasks extension): a tools/call answered with a durable handle, created in the
-- transaction of the work it stands for and ended, once, in the transaction of the event that
-- ends that work (store/src/conversation/mcp_task.rs).
CREATE TABLE mcp_tasks (
    id              TEXT PRIMARY KEY NOT NULL,     -- mtk_…
    owner_principal TEXT NOT NULL,                 -- the creator's communication principal
    tool            TEXT NOT NULL,                 -- the tool whose call it answered
    awaits_kind     TEXT NOT NULL CHECK (awaits_kind IN ('reply', 'agent_task', 'activation')),
    awaits_id       TEXT NOT NULL,                 -- the question's message, the agent task, the transfer
    conversation_id TEXT,                          -- a reply's conversation
    asked_seq       BIGINT,                       -- the question's seq: only a later message answers it
    status          TEXT NOT NULL CHECK (status IN ('working', 'completed', 'failed', 'cancelled')),
    status_message  TEXT,
    answer_id       TEXT,                          -- what ended it: the reply, the task, the transfer
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    ended_at        BIGINT,
    ends            BIGINT NOT NULL DEFAULT 0     -- terminal writes: 1 once ended, never more
);
CREATE INDEX mcp_tasks_awaiting ON mcp_tasks (awaits_kind, awaits_id);
CREATE INDEX mcp_tasks_by_conversation ON mcp_tasks (conversation_id, status);
CREATE INDEX mcp_tasks_by_owner ON mcp_tasks (owner_principal, expires_at);
