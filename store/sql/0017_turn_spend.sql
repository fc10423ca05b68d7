-- The compute spend a turn's end recorded with it (`finish_turn_spending`), on the wake
-- attempt it ended: an exact retry of an end whose commit outcome was unknown (the commit went
-- through, the answer was lost) finds the spend already recorded and says so, so the host does
-- not keep it owed and charge it a second time. NULL: no spend went with the end.
ALTER TABLE wake_attempts ADD COLUMN turn_spend_micro_usd INTEGER;
