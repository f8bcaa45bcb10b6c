// Holds a conversation with an A2A server through @a2a-js/sdk's client, as
// its users would: a first message without contextId, a second one in the
// context the first task came back with, a third one streamed in it, then a
// message to the finished first task. Prints one JSON object of what it
// saw; the Go test asserts on it.
//
//   node a2ajs_conversation.mjs BASE MODE RECEIVER
//
// MODE: default  ClientFactory() as shipped (A2A 1.0 JSON-RPC)
//       rest     the same, preferring HTTP+JSON
//       legacy03 legacyCompat with the card's 1.0 members removed (0.3)
import { randomUUID } from 'node:crypto';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver,
  JsonRpcTransportFactory, RestTransportFactory,
} from '@a2a-js/sdk/client';

const [base, mode, receiver] = process.argv.slice(2);
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

const message = (text, ids) => ({
  message: {
    messageId: randomUUID(),
    role: 1, // ROLE_USER
    parts: [{ content: { $case: 'text', value: text } }],
    metadata: { receiver_id: receiver },
    ...ids,
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

const out = { protocolVersion: client.protocolVersion, turns: [] };

const first = await client.sendMessage(message('turn one'));
out.turns.push({ id: first.id, context: first.contextId, state: first.status?.state, output: text(first.artifacts?.[0]?.parts) });

const second = await client.sendMessage(message('turn two', { contextId: first.contextId }));
out.turns.push({ id: second.id, context: second.contextId, state: second.status?.state, output: text(second.artifacts?.[0]?.parts) });

// The third turn streamed: every event names the context.
const third = { contexts: [], output: '' };
for await (const ev of client.sendMessageStream(message('turn three', { contextId: first.contextId }))) {
  const v = ev.payload?.value ?? {};
  third.contexts.push(v.contextId ?? '');
  if (ev.payload?.$case === 'task') third.id = v.id;
  if (ev.payload?.$case === 'artifactUpdate') third.output += text(v.artifact?.parts);
  if (ev.payload?.$case === 'statusUpdate') third.state = v.status?.state;
}
out.turns.push(third);

try {
  await client.sendMessage(message('to a finished task', { contextId: first.contextId, taskId: first.id }));
  out.finished = { chain: [], message: 'no error' };
} catch (e) {
  out.finished = errorInfo(e);
}

console.log(JSON.stringify(out));
