-- The host's model gateway: every call to a model is reserved before it is sent and settled
-- after (store/src/model_call.rs). A budget's `reserved_micro_usd` is the sum of its open
-- reservations; what a transfer may still spend is `allocated - spent - reserved`, so
-- concurrent reservations can never pass the allocation. A row stays `reserved` only while
-- its call is in flight: the host that restarts after a crash charges each open one in full.
ALTER TABLE budgets ADD COLUMN reserved_micro_usd INTEGER NOT NULL DEFAULT 0 CHECK (reserved_micro_usd >= 0);

CREATE TABLE model_calls (
    id                        TEXT PRIMARY KEY NOT NULL,  -- mc_...
    transfer_id               TEXT NOT NULL REFERENCES transfers (id),
    model                     TEXT NOT NULL,              -- the policy's model id
    status                    TEXT NOT NULL CHECK (status IN ('reserved', 'settled')),
    -- The prices of the model when the call was reserved (micro-USD per million tokens).
    price_input               INTEGER NOT NULL CHECK (price_input >= 0),
    price_output              INTEGER NOT NULL CHECK (price_output >= 0),
    price_cache_read          INTEGER NOT NULL CHECK (price_cache_read >= 0),
    price_cache_write         INTEGER NOT NULL CHECK (price_cache_write >= 0),
    input_tokens_bound        INTEGER NOT NULL CHECK (input_tokens_bound >= 0),
    max_output_tokens         INTEGER NOT NULL CHECK (max_output_tokens > 0),
    reserved_micro_usd        INTEGER NOT NULL CHECK (reserved_micro_usd >= 0),
    reserved_at               INTEGER NOT NULL,
    -- Set when settled.
    outcome                   TEXT CHECK (outcome IN ('completed', 'refused', 'unknown', 'interrupted')),
    input_tokens              INTEGER,
    cache_read_tokens         INTEGER,
    cache_write_tokens        INTEGER,
    output_tokens             INTEGER,
    charged_micro_usd         INTEGER CHECK (charged_micro_usd >= 0),
    latency_ms                INTEGER,
    settled_at                INTEGER,
    CHECK ((status = 'reserved') = (outcome IS NULL))
) STRICT;
CREATE INDEX model_calls_by_transfer ON model_calls (transfer_id, reserved_at);
CREATE INDEX model_calls_open ON model_calls (status) WHERE status = 'reserved';
