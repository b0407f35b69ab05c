// The official OpenAI Node SDK against a real `inkwell serve`.
// Env: INKWELL_URL (base, no /v1), INKWELL_TOKEN. Prints one JSON object.
'use strict';
const OpenAI = require('openai').default;
const { toFile } = require('openai');

function must(cond, msg) { if (!cond) { throw new Error(msg); } }

async function main() {
  const url = process.env.INKWELL_URL, token = process.env.INKWELL_TOKEN;
  must(url && token, 'INKWELL_URL and INKWELL_TOKEN must be set');
  const seen = [];
  const client = new OpenAI({
    baseURL: url + '/v1', apiKey: token, maxRetries: 0,
    fetch: async (u, init) => { seen.push(Object.fromEntries(new Headers(init.headers))); return fetch(u, init); },
  });
  const out = {};

  // Files + batches.
  const n = 3;
  let jsonl = '';
  for (let i = 1; i <= n; i++) {
    jsonl += JSON.stringify({ custom_id: `node-${i}`, method: 'POST', url: '/v1/chat/completions',
      body: { model: 'sketch', messages: [{ role: 'user', content: `note ${i}` }], max_tokens: 20 } }) + '\n';
  }
  const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), 'requests.jsonl'), purpose: 'batch' });
  must(file.id && file.purpose === 'batch' && file.bytes === Buffer.byteLength(jsonl), 'file: ' + JSON.stringify(file));
  let batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  const deadline = Date.now() + 20000;
  while (batch.status !== 'completed') {
    must(Date.now() < deadline, 'batch not completed in 20s: ' + JSON.stringify(batch));
    await new Promise((r) => setTimeout(r, 100));
    batch = await client.batches.retrieve(batch.id);
  }
  must(batch.request_counts.total === n && batch.request_counts.completed === n && batch.request_counts.failed === 0,
    'request_counts: ' + JSON.stringify(batch.request_counts));
  const text = await (await client.files.content(batch.output_file_id)).text();
  const lines = text.trim().split('\n').map((l) => JSON.parse(l));
  must(lines.length === n, `output has ${lines.length} lines, want ${n}`);
  for (const l of lines) {
    const b = l.response && l.response.body;
    must(l.response.status_code === 200 && b.object === 'chat.completion' && b.choices[0].message.content && b.usage,
      'output line: ' + JSON.stringify(l));
  }
  out.batch = { id: batch.id, status: batch.status, request_counts: batch.request_counts, output_lines: lines.map((l) => l.custom_id) };

  // A batch on the slow model ("writer"), cancelled while its lines are
  // queued or running. (A create of the same file again is the same batch,
  // by design: docs/batches.md, so each batch gets its own file.)
  let slow = '';
  for (let i = 1; i <= 20; i++) {
    slow += JSON.stringify({ custom_id: `slow-${i}`, method: 'POST', url: '/v1/chat/completions',
      body: { model: 'writer', messages: [{ role: 'user', content: `slow ${i}` }], max_tokens: 20 } }) + '\n';
  }
  const slowFile = await client.files.create({ file: await toFile(Buffer.from(slow), 'slow.jsonl'), purpose: 'batch' });
  const toCancel = await client.batches.create({ input_file_id: slowFile.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  const cancelling = await client.batches.cancel(toCancel.id);
  must(cancelling.id === toCancel.id && ['cancelling', 'cancelled'].includes(cancelling.status), 'cancel: ' + JSON.stringify(cancelling));
  let cancelled = cancelling;
  while (cancelled.status !== 'cancelled') {
    must(Date.now() < deadline + 10000, 'batch not cancelled: ' + JSON.stringify(cancelled));
    await new Promise((r) => setTimeout(r, 100));
    cancelled = await client.batches.retrieve(toCancel.id);
  }
  must(cancelled.request_counts.completed < 20, 'every line of the cancelled batch completed: ' + JSON.stringify(cancelled.request_counts));
  out.cancelled = { id: cancelled.id, first_status: cancelling.status, status: cancelled.status, request_counts: cancelled.request_counts };

  // One more batch, then the SDK's auto-pagination with limit 1.
  const third = await client.files.create({ file: await toFile(Buffer.from(jsonl), 'again.jsonl'), purpose: 'batch' });
  await client.batches.create({ input_file_id: third.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  const listed = [];
  for await (const b of client.batches.list({ limit: 1 })) { listed.push(b.id); }
  out.listed = listed;

  // The uploads, listed a page at a time (limit 1), then deleted: the
  // cleanup a script does once its batches are done.
  const files = [];
  for await (const f of client.files.list({ limit: 1, purpose: 'batch' })) { files.push(f.id); }
  out.files = { uploaded: [file.id, slowFile.id, third.id], listed: files, deleted: [] };
  for (const id of files) {
    const d = await client.files.delete(id);
    must(d.id === id && d.deleted === true && d.object === 'file', 'delete: ' + JSON.stringify(d));
    out.files.deleted.push(id);
  }
  try {
    await client.files.retrieve(file.id);
    throw new Error('a deleted file was retrieved');
  } catch (e) {
    must(e instanceof OpenAI.NotFoundError && e.status === 404, 'retrieve of a deleted file: ' + e);
  }
  out.files.left = (await client.files.list()).data.length;
  out.files.batch_after = (await client.batches.retrieve(batch.id)).request_counts;

  // Chat completion twice with one Idempotency-Key.
  const params = { model: 'sketch', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'a haiku' }] };
  const first = await client.chat.completions.create(params, { headers: { 'Idempotency-Key': 'node-chat-1' } });
  const again = await client.chat.completions.create(params, { headers: { 'Idempotency-Key': 'node-chat-1' } });
  must(first.id && first.id === again.id && first.choices[0].message.content, `ids ${first.id} ${again.id}`);
  out.chat = { id: first.id, again_id: again.id, content: first.choices[0].message.content, usage: first.usage };

  // Unknown model: BadRequestError, message naming the known models.
  try {
    await client.chat.completions.create({ model: 'gpt-5-nonexistent', messages: [{ role: 'user', content: 'x' }] });
    throw new Error('unknown model was accepted');
  } catch (e) {
    must(e instanceof OpenAI.BadRequestError && e.status === 400, 'unknown model error: ' + e);
    out.unknown_model = { status: e.status, class: e.constructor.name, message: e.message };
  }
  // What the SDK sends on its own.
  out.sdk_headers = Object.keys(seen[seen.length - 1]).sort();
  out.sdk_idempotency = seen.map((h) => h['idempotency-key'] || '').filter((k) => k && !k.startsWith('node-'));
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error('openai.cjs FAILED: ' + (e && e.stack || e)); process.exit(1); });
