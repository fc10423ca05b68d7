-- PostgreSQL counterpart of store/sql/0009_model_calls.sql: the same tables, columns, constraints and indexes
-- (SQLite INTEGER -> BIGINT, TEXT -> TEXT, BLOB -> BYTEA; STRICT and WITHOUT ROWID have no
-- counterpart and need none: PostgreSQL columns are always typed).

-- The host's model gateway: every call to a model is reserved before it is sent and settled
-- after (store/src/model_call.rs). A budget's `reserved_micro_usd` is the sum of its open
-- reservations; what a transfer may still spend is `allocated - spent - reserved`, so
-- concurrent reservations can never pass the allocation. A row stays `reserved` only while
-- its call is in flight: the host that restarts after a crash charges each open one in full.
ALTER TABLE budgets ADD COLUMN reserved_micro_usd BIGINT NOT NULL DEFAULT 0 CHECK (reserved_micro_usd >= 0);

CREATE TABLE model_calls (
    id                        TEXT PRIMARY KEY NOT NULL,  -- mc_...
    transfer_id               TEXT NOT NULL REFERENCES transfers (id),
    model                     TEXT NOT NULL,              -- the policy's model id
    status                    TEXT NOT NULL CHECK (status IN ('reserved', 'settled')),
    -- The prices of the model when the call was reserved (micro-USD per million tokens).
    price_input               BIGINT NOT NULL CHECK (price_input >= 0),
    price_output              BIGINT NOT NULL CHECK (price_output >= 0),
    price_cache_read          BIGINT NOT NULL CHECK (price_cache_read >= 0),
    price_cache_write         BIGINT NOT NULL CHECK (price_cache_write >= 0),
    input_tokens_bound        BIGINT NOT NULL CHECK (input_tokens_bound >= 0),
    max_output_tokens         BIGINT NOT NULL CHECK (max_output_tokens > 0),
    reserved_micro_usd        BIGINT NOT NULL CHECK (reserved_micro_usd >= 0),
    reserved_at               BIGINT NOT NULL,
    -- Set when settled.
    outcome                   TEXT CHECK (outcome IN ('completed', 'refused', 'unknown', 'interrupted')),
    input_tokens              BIGINT,
    cache_read_tokens         BIGINT,
    cache_write_tokens        BIGINT,
    output_tokens             BIGINT,
    charged_micro_usd         BIGINT CHECK (charged_micro_usd >= 0),
    latency_ms                BIGINT,
    settled_at                BIGINT,
    CHECK ((status = 'reserved') = (outcome IS NULL))
);
CREATE INDEX model_calls_by_transfer ON model_calls (transfer_id, reserved_at);
CREATE INDEX model_calls_open ON model_calls (status) WHERE status = 'reserved';
