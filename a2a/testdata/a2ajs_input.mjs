// Drives input-required with @a2a-js/sdk's client, as its users would, and
// prints one JSON object of what it saw; the Go test asserts on it.
//
//   node a2ajs_input.mjs BASE MODE TOKEN OTHER_TOKEN
//
// MODE: default (A2A 1.0 JSON-RPC), rest (HTTP+JSON), legacy03 (the 0.3 wire).
// Every request carries "Authorization: Bearer TOKEN"; the answer from
// OTHER_TOKEN must be refused.
import { randomUUID } from 'node:crypto';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver,
  JsonRpcTransportFactory, RestTransportFactory,
} from '@a2a-js/sdk/client';

const [base, mode, token, other] = process.argv.slice(2);
const authed = (tok) => (url, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set('Authorization', `Bearer ${tok}`);
  return fetch(url, { ...init, headers });
};

async function connect(tok) {
  const fetchImpl = authed(tok);
  const legacy = mode === 'legacy03' ? { legacyCompat: { enabled: true } } : {};
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    cardResolver: new DefaultAgentCardResolver({ fetchImpl, ...legacy }),
    transports: [new JsonRpcTransportFactory({ fetchImpl, ...legacy }), new RestTransportFactory({ fetchImpl, ...legacy })],
    preferredTransports: mode === 'rest' ? ['HTTP+JSON'] : ['JSONRPC'],
  }));
  if (mode === 'legacy03') {
    const raw = await (await fetchImpl(new URL('.well-known/agent-card.json', base + '/'))).json();
    delete raw.supportedInterfaces;
    delete raw.securityRequirements;
    return factory.createFromAgentCard(raw);
  }
  return factory.createFromUrl(base);
}

const client = await connect(token);
const intruder = await connect(other);

const message = (part, task) => ({
  message: {
    messageId: randomUUID(),
    role: 1, // ROLE_USER
    parts: [part],
    metadata: task ? undefined : { receiver_id: 'gated' },
    taskId: task?.id ?? '',
    contextId: task?.contextId ?? '',
  },
});
const text = (t) => ({ content: { $case: 'text', value: t } });
const data = (d) => ({ content: { $case: 'data', value: d } });
const partText = (parts) => (parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const partData = (parts) => (parts ?? []).map((p) => (p.content?.$case === 'data' ? p.content.value : null)).find((d) => d) ?? null;
const status = (t) => ({ state: t.status?.state, text: partText(t.status?.message?.parts), data: partData(t.status?.message?.parts) });

const out = { protocolVersion: client.protocolVersion };

const sent = await client.sendMessage(message(text('{"path":"a.txt"}')));
out.asked = status(sent);
out.get = status(await client.getTask({ id: sent.id }));
try {
  await intruder.sendMessage(message(data({ approval: 'allow' }), sent));
  out.intruder = 'no error';
} catch (e) {
  out.intruder = String(e?.message ?? e);
}
const done = await client.sendMessage(message(data({ approval: 'allow' }), sent));
out.allowed = { state: done.status?.state, output: partText(done.artifacts?.[0]?.parts) };

let streamed = null;
let last = null;
for await (const ev of client.sendMessageStream(message(text('{"path":"b.txt"}')))) {
  const p = ev.payload ?? {};
  if (p.$case === 'task') streamed = p.value;
  last = p.value;
}
out.streamEnd = status(last);
const denied = await client.sendMessage(message(text('deny'), streamed));
out.denied = { state: denied.status?.state, output: partText(denied.artifacts?.[0]?.parts) };

console.log(JSON.stringify(out));
