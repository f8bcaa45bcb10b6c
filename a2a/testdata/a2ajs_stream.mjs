// Streams a send through @a2a-js/sdk's client to agent "streamer" and
// prints one JSON object of what it saw; the Go test asserts on it. On the
// first artifact update it asks PROBE (a URL of the test) whether the
// model server had finished its answer by then.
//
//   node a2ajs_stream.mjs BASE MODE PROBE
//
// MODE: default (A2A 1.0, JSON-RPC), rest (A2A 1.0, HTTP+JSON), legacy03
// (legacyCompat on the card's 0.3 members alone: the 0.3 wire).
import { randomUUID } from 'node:crypto';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver,
  JsonRpcTransportFactory, RestTransportFactory,
} from '@a2a-js/sdk/client';

const [base, mode, probe] = process.argv.slice(2);
const legacy = { legacyCompat: { enabled: true } };
let client;
switch (mode) {
  case 'default':
    client = await new ClientFactory().createFromUrl(base);
    break;
  case 'rest':
    client = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      preferredTransports: ['HTTP+JSON'],
    })).createFromUrl(base);
    break;
  case 'legacy03': {
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      cardResolver: new DefaultAgentCardResolver(legacy),
      transports: [new JsonRpcTransportFactory(legacy), new RestTransportFactory(legacy)],
    }));
    const raw = await (await fetch(new URL('.well-known/agent-card.json', base + '/'))).json();
    delete raw.supportedInterfaces;
    delete raw.securityRequirements;
    client = await factory.createFromAgentCard(raw);
    break;
  }
  default:
    throw new Error(`unknown mode ${mode}`);
}

const text = (parts) => (parts ?? []).map((p) => p.content?.value ?? '').join('');
const out = { protocolVersion: client.protocolVersion, events: [], finishedAtFirst: -1 };
const start = performance.now();
for await (const ev of client.sendMessageStream({
  message: {
    messageId: randomUUID(),
    role: 1, // ROLE_USER
    parts: [{ content: { $case: 'text', value: 'go' } }],
    metadata: { receiver_id: 'streamer' },
  },
})) {
  const p = ev.payload ?? {};
  const v = p.value ?? {};
  const e = { kind: p.$case, state: v.status?.state ?? v.state ?? 0 };
  if (p.$case === 'artifactUpdate') {
    e.text = text(v.artifact?.parts);
    e.append = !!v.append;
    e.lastChunk = !!v.lastChunk;
    if (out.finishedAtFirst < 0) {
      out.firstAfterMs = performance.now() - start;
      out.finishedAtFirst = Number(await (await fetch(probe)).text());
    }
  }
  if (p.$case === 'statusUpdate' && v.metadata?.usage) {
    out.usage = v.metadata.usage; // the final status's (the run's usage)
  }
  out.events.push(e);
}
console.log(JSON.stringify(out));
