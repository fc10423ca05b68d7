-- PostgreSQL counterpart of store/sql/0008_usage_events_by_kind.sql: the same tables, columns, constraints and indexes
-- (SQLite INTEGER -> BIGINT, TEXT -> TEXT, BLOB -> BYTEA; STRICT and WITHOUT ROWID have no
-- counterpart and need none: PostgreSQL columns are always typed).

-- Bounded reads of a transfer's log for people (store/src/event_page.rs): the console's spend
-- chart finds "the last usage report at or before an instant" and "the budget's opening" by
-- one index probe each, however long the log has grown.
CREATE INDEX usage_events_by_kind ON usage_events (transfer_id, type, at);
