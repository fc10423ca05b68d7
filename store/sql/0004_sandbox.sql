-- The sandbox host's durable state: the component registry and per-transfer checkpoints.

-- Guest components the host has registered. The bytes live on the host's disk, named by digest;
-- a transfer's `component` is a digest or one of these names.
CREATE TABLE components (
    digest        TEXT PRIMARY KEY NOT NULL CHECK (digest GLOB 'sha256:*' AND length(digest) = 71),
    name          TEXT UNIQUE,
    size_bytes    INTEGER NOT NULL CHECK (size_bytes > 0),
    registered_at INTEGER NOT NULL
) STRICT;

-- An agent's durable working memory: one blob per transfer, bounded by its tier when saved.
CREATE TABLE checkpoints (
    transfer_id TEXT PRIMARY KEY NOT NULL REFERENCES transfers (id),
    state       BLOB NOT NULL,
    saved_at    INTEGER NOT NULL
) STRICT;
