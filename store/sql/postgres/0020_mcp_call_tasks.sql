-- PostgreSQL counterpart of store/sql/0020_mcp_call_tasks.sql: the same widened checks and the
-- three columns of a call task (PostgreSQL widens a CHECK in place; no rebuild).
ALTER TABLE mcp_tasks DROP CONSTRAINT mcp_tasks_awaits_kind_check;
ALTER TABLE mcp_tasks ADD CONSTRAINT mcp_tasks_awaits_kind_check
    CHECK (awaits_kind IN ('reply', 'agent_task', 'activation', 'call'));
ALTER TABLE mcp_tasks DROP CONSTRAINT mcp_tasks_status_check;
ALTER TABLE mcp_tasks ADD CONSTRAINT mcp_tasks_status_check
    CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled'));
ALTER TABLE mcp_tasks ADD COLUMN input_requests TEXT;   -- a call's pending requests to the client: JSON object by key
ALTER TABLE mcp_tasks ADD COLUMN input_responses TEXT;  -- a call's answers collected so far: JSON object by key
ALTER TABLE mcp_tasks ADD COLUMN outcome TEXT;          -- a call's result (completed) or error (failed): JSON object
