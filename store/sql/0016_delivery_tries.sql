-- A delivery's tries: how many turns read it while it was queued and ended with it still
-- queued. A turn's end counts them in its own commit; the guest reads the count to stop
-- retrying a message it cannot answer (a poison message), and the owner sees it beside the
-- delivery it may skip. Existing deliveries start untried.
ALTER TABLE deliveries ADD COLUMN tries INTEGER NOT NULL DEFAULT 0 CHECK (tries >= 0);
