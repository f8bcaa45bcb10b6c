// Drives an A2A server with @a2a-js/sdk's client, as its users would, and
// prints one JSON object of what it saw; the Go test asserts on it.
//
//   node a2ajs_client.mjs BASE MODE
//
// MODE: default  ClientFactory() as shipped (A2A 1.0, the card's first binding)
//       rest     the same, preferring HTTP+JSON
//       legacy   legacyCompat enabled on the resolver and transports
//       legacy03 legacyCompat with the card's 1.0 members removed, so the
//                client takes the 0.3 path (LegacyJsonRpcTransport)
import { randomUUID } from 'node:crypto';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver,
  JsonRpcTransportFactory, RestTransportFactory,
} from '@a2a-js/sdk/client';

const [base, mode] = process.argv.slice(2);
const legacy = { legacyCompat: { enabled: true } };
let factory;
switch (mode) {
  case 'default':
    factory = new ClientFactory();
    break;
  case 'rest':
    factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      preferredTransports: ['HTTP+JSON'],
    }));
    break;
  case 'legacy':
  case 'legacy03':
    factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      cardResolver: new DefaultAgentCardResolver(legacy),
      transports: [new JsonRpcTransportFactory(legacy), new RestTransportFactory(legacy)],
    }));
    break;
  default:
    throw new Error(`unknown mode ${mode}`);
}

let client;
if (mode === 'legacy03') {
  const raw = await (await fetch(new URL('.well-known/agent-card.json', base + '/'))).json();
  delete raw.supportedInterfaces;
  delete raw.securityRequirements;
  client = await factory.createFromAgentCard(raw);
} else {
  client = await factory.createFromUrl(base);
}

const message = (text, receiver) => ({
  message: {
    messageId: randomUUID(),
    role: 1, // ROLE_USER
    parts: [{ content: { $case: 'text', value: text } }],
    metadata: receiver ? { receiver_id: receiver } : undefined,
  },
});
const text = (parts) => (parts ?? []).map((p) => p.content?.value ?? '').join('');
const errorInfo = (e) => {
  const chain = [];
  for (let p = Object.getPrototypeOf(e); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    chain.push(p.constructor.name);
  }
  return { chain, message: String(e?.message ?? e) };
};

const out = { protocolVersion: client.protocolVersion };

const sent = await client.sendMessage(message('hello js', 'upper'));
out.send = { id: sent.id, state: sent.status?.state, output: text(sent.artifacts?.[0]?.parts) };

const got = await client.getTask({ id: sent.id });
out.get = { id: got.id, state: got.status?.state, output: text(got.artifacts?.[0]?.parts), history: text(got.history?.[0]?.parts) };

out.stream = [];
for await (const ev of client.sendMessageStream(message('streamed js'))) {
  const p = ev.payload ?? {};
  const v = p.value ?? {};
  out.stream.push({ kind: p.$case, state: v.status?.state ?? v.state, text: text(v.artifact?.parts) });
}

out.cancel = [];
for await (const ev of client.sendMessageStream(message('wait', 'slow'))) {
  const p = ev.payload ?? {};
  if (p.$case === 'task') {
    const c = await client.cancelTask({ id: p.value.id });
    out.cancel.push({ kind: 'cancelTask', state: c.status?.state });
  } else {
    out.cancel.push({ kind: p.$case, state: p.value?.status?.state });
  }
}

try {
  await client.getTask({ id: 'no-such-task' });
  out.unknown = { chain: [], message: 'no error' };
} catch (e) {
  out.unknown = errorInfo(e);
}

console.log(JSON.stringify(out));
