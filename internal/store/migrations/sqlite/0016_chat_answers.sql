-- The whole answer of a chat request (docs/design.md §12, docs/providers.md):
--
--   * results.response: the provider's answer as the chat.completion object
--     (an Anthropic answer mapped to it), JSON text kept as received; NULL
--     for rows stored before, and after prune (which removes it with the text);
--   * results.model, charges.model: the model the job ran on, as clients name it;
--   * results.finish_reason: stop, length, tool_calls, content_filter;
--   * results/charges prompt_tokens, completion_tokens: the answer's usage,
--     which the charge of a priced model is computed from; NULL when the
--     answer reported none (and for rows stored before).

ALTER TABLE results ADD COLUMN response TEXT;
ALTER TABLE results ADD COLUMN model TEXT;
ALTER TABLE results ADD COLUMN finish_reason TEXT;
ALTER TABLE results ADD COLUMN prompt_tokens INTEGER;
ALTER TABLE results ADD COLUMN completion_tokens INTEGER;
ALTER TABLE charges ADD COLUMN model TEXT;
ALTER TABLE charges ADD COLUMN prompt_tokens INTEGER;
ALTER TABLE charges ADD COLUMN completion_tokens INTEGER;
