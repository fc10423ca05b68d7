-- Bounded reads of a transfer's log for people (store/src/event_page.rs): the console's spend
-- chart finds "the last usage report at or before an instant" and "the budget's opening" by
-- one index probe each, however long the log has grown.
CREATE INDEX usage_events_by_kind ON usage_events (transfer_id, type, at);
