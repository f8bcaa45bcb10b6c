// An A2A agent served by @a2a-js/sdk over HTTP+JSON with its v0.3
// compatibility layer (restHandler with legacyCompat), for the Go tests of
// a2aremote's own 0.3 HTTP+JSON transport: an implementation of the 0.3
// REST wire independent of a2a-go's.
//
//   node --preserve-symlinks a2ajs03_server.mjs BEHAVIOUR
//
// BEHAVIOUR: answer  an artifact "remote answer to: <input>", then completed
//            fail    failed, with the status message "the remote refuses: <input>"
//            block   working, then waits until cancelled
// It also serves 0.3 JSON-RPC at /rpc (jsonRpcHandler with legacyCompat).
// It listens on 127.0.0.1 (a free port), prints {"url": BASE} on one line
// and serves until its stdin closes; it prints "started <task id>" when a
// blocked task begins to wait and "cancel <task id>" when a cancellation
// arrives.
import express from 'express';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const behaviour = process.argv[2] ?? 'answer';
const COMPLETED = 3, FAILED = 4, CANCELED = 5, WORKING = 2, SUBMITTED = 1, AGENT = 2;

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' });
const status = (state, message) => ({ state, message, timestamp: new Date().toISOString() });
const agentMessage = (ctx, s) => ({
  messageId: crypto.randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: AGENT,
  parts: [text(s)], metadata: undefined, extensions: [], referenceTaskIds: [],
});

const waiting = new Map(); // task id -> resolve of its blocked execution

const executor = {
  async execute(ctx, bus) {
    const input = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    if (!ctx.task) {
      bus.publish(AgentEvent.task({
        id: ctx.taskId, contextId: ctx.contextId, status: status(SUBMITTED), artifacts: [], history: [ctx.userMessage], metadata: undefined,
      }));
    }
    const update = (state, message) => bus.publish(AgentEvent.statusUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, status: status(state, message), metadata: undefined }));
    if (behaviour === 'fail') {
      update(FAILED, agentMessage(ctx, 'the remote refuses: ' + input));
    } else if (behaviour === 'block') {
      update(WORKING);
      console.log('started ' + ctx.taskId);
      await new Promise((resolve) => waiting.set(ctx.taskId, resolve));
      update(CANCELED);
    } else {
      bus.publish(AgentEvent.artifactUpdate({
        taskId: ctx.taskId, contextId: ctx.contextId, append: false, lastChunk: true, metadata: undefined,
        artifact: { artifactId: 'answer', name: '', description: '', parts: [text('remote answer to: ' + input)], metadata: undefined, extensions: [] },
      }));
      update(COMPLETED);
    }
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    console.log('cancel ' + taskId);
    const resolve = waiting.get(taskId);
    if (resolve) {
      waiting.delete(taskId);
      resolve();
    }
  },
};

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: 'Planner', description: 'Plans trips (A2A 0.3 HTTP+JSON, @a2a-js/sdk).', version: '1',
    supportedInterfaces: [
      { url: base, protocolBinding: 'HTTP+JSON', protocolVersion: '0.3', tenant: '' },
      { url: base + '/rpc', protocolBinding: 'JSONRPC', protocolVersion: '0.3', tenant: '' },
    ],
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: 'plan', name: 'plan', description: 'makes a plan', tags: ['plan'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    securitySchemes: {}, securityRequirements: [], signatures: [],
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  app.use(restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
  app.use('/rpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
  console.log(JSON.stringify({ url: base }));
});
process.stdin.resume();
process.stdin.on('end', () => {
  for (const resolve of waiting.values()) resolve();
  server.closeAllConnections?.();
  server.close(() => process.exit(0));
});
