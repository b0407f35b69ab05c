-- The lanes row names its holder's process precisely enough to tell, on the
-- same host, whether that very process still lives: a flock on a file that
-- can be unlinked is not proof of death by itself (docs/recovery.md).
--   boot_id     the kernel's boot id (/proc/sys/kernel/random/boot_id) when
--               the holder started: a different boot means the holder is gone;
--   proc_start  the holder's start time in clock ticks since boot
--               (/proc/PID/stat field 22): a pid reused by another process
--               has another start time.
-- answers_waiting counts provider answers the lane holds in memory and has
-- not yet stored (the database was busy, locked or full); written with each
-- heartbeat that gets through, shown by the views.
ALTER TABLE lanes ADD COLUMN boot_id TEXT;
ALTER TABLE lanes ADD COLUMN proc_start TEXT;
ALTER TABLE lanes ADD COLUMN answers_waiting INTEGER NOT NULL DEFAULT 0;
