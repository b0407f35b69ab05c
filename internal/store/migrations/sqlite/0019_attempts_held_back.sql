-- job_attempts.held_back: the attempt was given back unsent because its
-- provider's limiter would have held the call past a second on a lane with
-- several providers (docs/providers.md, "Each kind of provider"). Its class
-- is rate_limited (the provider's limit held it) but it is no 429 answer:
-- automatic retry counts it neither as an attempt nor as a 429
-- (AutoRetryCounts). NULL for every other attempt, 1 for those.
ALTER TABLE job_attempts ADD COLUMN held_back INTEGER;
