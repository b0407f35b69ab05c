-- A lane runs many provider calls at once (serve --concurrency). Its row
-- says how many it may run (slots), how many it ran at its last heartbeat
-- (slots_in_use), and until when a provider's 429 pauses every call of the
-- lane (paused_until; NULL when not paused). Written by each heartbeat.
ALTER TABLE lanes ADD COLUMN slots INTEGER NOT NULL DEFAULT 1;
ALTER TABLE lanes ADD COLUMN slots_in_use INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lanes ADD COLUMN paused_until timestamptz;
