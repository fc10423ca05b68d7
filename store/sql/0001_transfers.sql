-- Transfers of the Handoff Protocol: the snapshot, the budget, the audit log and the
-- single-use token ledger. Times are integer microseconds since the Unix epoch; money is
-- integer micro-USD. No column can hold a raw secret: mcp_config holds credential *references*.

CREATE TABLE transfers (
    id                    TEXT PRIMARY KEY NOT NULL,
    status                TEXT NOT NULL,
    source_host           TEXT NOT NULL,
    system_prompt         TEXT NOT NULL,
    message_history       TEXT NOT NULL,  -- JSON array of {role, content}
    message_count         INTEGER NOT NULL,
    tool_state            TEXT NOT NULL,  -- JSON object
    mcp_config            TEXT NOT NULL,  -- JSON array of {server, credRef}
    checksum              TEXT NOT NULL,  -- SHA-256 of the canonical snapshot, lowercase hex
    tier                  TEXT,           -- set by provision_runtime
    component             TEXT,           -- guest component digest or name, set by provision_runtime
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL,
    activation_started_at INTEGER,        -- non-null only while an activation is in progress
    activated_at          INTEGER,
    insolvent_at          INTEGER,
    ended_at              INTEGER,        -- terminated or expired
    end_reason            TEXT,
    CHECK (activation_started_at IS NULL OR status = 'pushed')
) STRICT;

-- The expiry reaper scans live unactivated transfers by age.
CREATE INDEX transfers_by_status_created ON transfers (status, created_at);
-- The insolvency reaper scans insolvent transfers by the time they became insolvent.
CREATE INDEX transfers_insolvent_since ON transfers (insolvent_at) WHERE status = 'insolvent';

CREATE TABLE budgets (
    transfer_id                   TEXT PRIMARY KEY NOT NULL REFERENCES transfers (id),
    allocated_micro_usd           INTEGER NOT NULL CHECK (allocated_micro_usd > 0),
    rate_micro_usd_per_cpu_second INTEGER NOT NULL CHECK (rate_micro_usd_per_cpu_second >= 0),
    spent_micro_usd               INTEGER NOT NULL DEFAULT 0 CHECK (spent_micro_usd >= 0),
    opened_at                     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- The audit log. `id` orders events: it only ever grows (AUTOINCREMENT never reuses ids).
CREATE TABLE usage_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    transfer_id TEXT NOT NULL REFERENCES transfers (id),
    type        TEXT NOT NULL,
    at          INTEGER NOT NULL,
    detail      TEXT NOT NULL  -- JSON object, never a secret
) STRICT;
CREATE INDEX usage_events_by_transfer ON usage_events (transfer_id, id);

-- Single-use ledger: the primary-key collision on a replayed token *is* the check.
CREATE TABLE used_transfer_tokens (
    token_id    TEXT PRIMARY KEY NOT NULL,
    transfer_id TEXT NOT NULL REFERENCES transfers (id),
    scope       TEXT NOT NULL,
    used_at     INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
