// The official Anthropic TypeScript SDK against providersim's Messages API.
// Env: SIM_URL (base, no /v1); SIM_FAILING_URL: a sim that answers every call 529.
'use strict';
const Anthropic = require('@anthropic-ai/sdk').default;

function must(cond, msg) { if (!cond) { throw new Error(msg); } }

async function main() {
  const url = process.env.SIM_URL, failing = process.env.SIM_FAILING_URL;
  must(url && failing, 'SIM_URL and SIM_FAILING_URL must be set');
  const out = {};
  const client = new Anthropic({ baseURL: url, apiKey: 'sim-key', maxRetries: 0 });
  const m = await client.messages.create({
    model: 'claude-sim-1', max_tokens: 100, system: 'Be brief.',
    messages: [{ role: 'user', content: 'a haiku about ink' }],
  });
  must(m.id && m.type === 'message' && m.role === 'assistant' && m.content.length > 0 &&
    m.content.every((b) => b.type === 'text' && typeof b.text === 'string') && m.model && m.stop_reason &&
    m.usage.input_tokens > 0 && m.usage.output_tokens > 0, 'message: ' + JSON.stringify(m));
  out.message = m;

  const bad = new Anthropic({ baseURL: failing, apiKey: 'sim-key', maxRetries: 0 });
  try {
    await bad.messages.create({ model: 'claude-sim-1', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
    throw new Error('a 529 sim answered');
  } catch (e) {
    must(e instanceof Anthropic.APIError && e.status === 529, 'overloaded: ' + e);
    must(e.error && e.error.type === 'error' && e.error.error && e.error.error.type === 'overloaded_error', 'error body: ' + JSON.stringify(e.error));
    out.overloaded = { status: e.status, class: e.constructor.name, error: e.error };
  }
  // A sim limited in requests per minute: the second call is a 429 with
  // retry-after, which the SDK waits out and retries.
  const limited = process.env.SIM_LIMITED_URL;
  if (limited) {
    const statuses = [];
    const lc = new Anthropic({ baseURL: limited, apiKey: 'sim-key', maxRetries: 3,
      fetch: async (u, init) => { const r = await fetch(u, init); statuses.push(r.status); return r; } });
    const params = { model: 'claude-sim-1', max_tokens: 10, messages: [{ role: 'user', content: 'limited' }] };
    const a = await lc.messages.create(params);
    const b = await lc.messages.create(params);
    must(statuses.includes(429) && statuses[statuses.length - 1] === 200, 'statuses: ' + JSON.stringify(statuses));
    out.limited = { ids: [a.id, b.id], statuses };
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error('anthropic.cjs FAILED: ' + (e && e.stack || e)); process.exit(1); });
