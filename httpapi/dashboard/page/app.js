'use strict';
// The axocoatl dashboard. Everything the daemon sends is rendered as text
// (textContent, setAttribute), never parsed as HTML.
(() => {
  const TOKEN_KEY = 'axocoatl.token';
  const FEED_MAX = 200;
  const BACKOFF_MIN = 500, BACKOFF_MAX = 30000;
  const $ = (id) => document.getElementById(id);

  // el builds an element; string children become text nodes.
  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') n.className = v;
      else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
      else n.setAttribute(k, v);
    }
    n.append(...children.map((c) => (c instanceof Node ? c : String(c ?? ''))));
    return n;
  }

  function showError(id, err) {
    const p = $(id);
    p.textContent = err ? String(err.message || err) : '';
    p.hidden = !err;
  }

  // ---- token -------------------------------------------------------------

  let token = sessionStorage.getItem(TOKEN_KEY) || '';

  // A panel says "None configured" only once the API answered: before
  // that (with a token, until it is entered) it cannot know.
  const loaded = { servers: false, webhooks: false };
  function showLoaded(panel, count) {
    loaded[panel] = true;
    $(panel + '-unknown').hidden = true;
    $(panel + '-empty').hidden = count > 0;
  }
  function showUnknown(text) {
    for (const panel of Object.keys(loaded)) {
      if (!loaded[panel]) $(panel + '-unknown').textContent = text;
    }
  }

  function askToken(message) {
    showUnknown('Not known until the API token is entered.');
    token = '';
    sessionStorage.removeItem(TOKEN_KEY);
    $('auth-msg').textContent = message;
    $('auth').hidden = false;
    $('token').focus();
  }

  $('auth').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = $('token').value.trim();
    if (!t) return;
    token = t;
    sessionStorage.setItem(TOKEN_KEY, t);
    $('token').value = '';
    $('auth').hidden = true;
    showUnknown('Loading…');
    start();
  });

  // ---- HTTP --------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // api calls the daemon and returns the decoded JSON, or throws an APIError
  // carrying the message of the contract's {"error":{"code","message"}}.
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, {
      method, headers, cache: 'no-store', credentials: 'omit',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    if (res.status === 401) {
      askToken(token ? 'The token was refused. Enter it again.' : 'This daemon needs its API token.');
    }
    if (!res.ok) {
      const e = (data && data.error) || {};
      throw new APIError(res.status, e.code || '', e.message || text.trim() || `HTTP ${res.status}`);
    }
    return data;
  }

  const listOf = (data, key) => (Array.isArray(data) ? data : (data && data[key]) || []);

  // ---- agents ------------------------------------------------------------

  // The model a provider uses when the config names none.
  const DEFAULT_MODEL = { openai: 'gpt-4o-mini', ollama: 'llama3.2', anthropic: 'claude-sonnet-5-5', echo: '—' };

  let agentList = [];
  let toolsByAgent = new Map(); // agent id → [tool name]

  async function loadAgents() {
    try {
      agentList = listOf(await api('GET', '/api/agents'), 'agents');
      renderAgents();
      showError('agents-error', null);
    } catch (err) {
      showError('agents-error', err);
    }
  }

  // The tools each agent really has (MCP tools come and go with servers).
  async function loadTools() {
    try {
      const m = new Map();
      for (const tool of listOf(await api('GET', '/api/tools'), 'tools')) {
        for (const id of tool.agents || []) {
          if (!m.has(id)) m.set(id, []);
          m.get(id).push(tool.name);
        }
      }
      toolsByAgent = m;
      renderAgents();
    } catch { /* the agents table still shows the rest */ }
  }

  // lastRun is the newest run of an agent.
  function lastRun(agentID) {
    let best = null;
    for (const r of runs.values()) if (r.agent === agentID && (!best || r.start > best.start)) best = r;
    return best;
  }

  function renderAgents() {
    const agents = agentList;
    $('agents').replaceChildren(...agents.map((a) => {
      const status = String(a.status || '');
      const model = a.model || (a.provider in DEFAULT_MODEL ? DEFAULT_MODEL[a.provider] + (a.provider === 'echo' ? '' : ' (default)') : '—');
      const tools = toolsByAgent.get(a.id) || [];
      const last = lastRun(a.id);
      const lastCell = el('td', { class: 'last-run' });
      if (last) {
        lastCell.append(el('span', { class: 'outcome-' + last.status }, last.status),
          last.error ? el('span', { class: 'error' }, ' ' + last.error) : '');
        lastCell.title = 'task ' + last.task;
      } else {
        lastCell.append(el('span', { class: 'muted' }, '—'));
      }
      return el('tr', { 'data-agent': a.id },
        el('td', { title: a.description || '' }, a.name && a.name !== a.id ? `${a.name} (${a.id})` : a.id),
        el('td', {}, a.provider || ''),
        el('td', { class: 'model' }, model),
        el('td', { class: /^[a-z]+$/.test(status) ? 'status-' + status : '' }, status),
        el('td', { class: 'tools' }, ...(tools.length ? tools.map((n) => el('span', { class: 'tool' }, n)) : [el('span', { class: 'muted' }, 'none')])),
        lastCell);
    }));
    if (agents.length === 0) $('agents').append(el('tr', {}, el('td', { colspan: '6', class: 'muted' }, 'No agents.')));
    const sel = $('run-agent');
    const chosen = sel.value;
    sel.replaceChildren(...agents.map((a) => el('option', { value: a.id }, a.id)));
    if (agents.some((a) => a.id === chosen)) sel.value = chosen;
  }

  // Agent status changes with every run; refresh at most every 300 ms.
  let agentsTimer = 0;
  function refreshAgentsSoon() {
    if (!agentsTimer) agentsTimer = setTimeout(() => { agentsTimer = 0; loadAgents(); }, 300);
  }

  // ---- run form ----------------------------------------------------------

  $('run').addEventListener('submit', async (e) => {
    e.preventDefault();
    const id = $('run-agent').value;
    if (!id) return;
    const button = $('run-submit'), out = $('run-output'), meta = $('run-meta');
    button.disabled = true;
    $('run-result').hidden = false;
    meta.textContent = `Running ${id}…`;
    out.textContent = '';
    out.dataset.state = 'running';
    try {
      const r = await api('POST', `/api/agents/${encodeURIComponent(id)}/execute`, { input: $('run-input').value });
      meta.textContent = `${r.agent_id || id} · task ${r.task_id || '?'} · ${r.status || 'completed'}`;
      out.textContent = typeof r.output === 'string' ? r.output : JSON.stringify(r.output, null, 2);
      out.dataset.state = 'done';
    } catch (err) {
      meta.textContent = `${id} · failed (HTTP ${err.status || '?'}${err.code ? ', ' + err.code : ''})`;
      out.textContent = err.message;
      out.dataset.state = 'error';
    } finally {
      button.disabled = false;
    }
  });

  $('run-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('run').requestSubmit();
  });

  // ---- approvals ---------------------------------------------------------

  const pending = new Map(); // approval id → ApprovalRequested payload

  function setPending(list) {
    pending.clear();
    for (const a of list || []) {
      const id = a && (a.approval_id || a.id);
      if (id) pending.set(String(id), a);
    }
    renderApprovals();
  }

  async function loadApprovals() {
    try {
      setPending(listOf(await api('GET', '/api/approvals'), 'approvals'));
      showError('approvals-error', null);
    } catch (err) {
      // No approval module: nothing is ever pending.
      if (err.status === 404 || err.status === 405) setPending([]);
      else showError('approvals-error', err);
    }
  }

  function renderApprovals() {
    $('approvals').replaceChildren(...[...pending].map(([id, a]) => {
      const result = el('span', { class: 'error' });
      const decide = async (decision, li, remember) => {
        for (const b of li.querySelectorAll('button')) b.disabled = true;
        try {
          await api('POST', `/api/approvals/${encodeURIComponent(id)}`, { decision, remember });
          pending.delete(id);
          renderApprovals();
        } catch (err) {
          if (err.status === 409 || err.status === 404) { pending.delete(id); renderApprovals(); return; }
          result.textContent = err.message;
          for (const b of li.querySelectorAll('button')) b.disabled = false;
        }
      };
      const args = typeof a.arguments === 'string' ? a.arguments : JSON.stringify(a.arguments ?? {});
      const li = el('li', { 'data-approval': id },
        el('div', {}, el('strong', {}, a.tool || '?'), ` from ${a.server || 'a native tool'} for agent ${a.agent_id || '?'}`),
        el('code', {}, args),
        a.expires_at ? el('span', { class: 'muted' }, 'expires ' + new Date(a.expires_at).toLocaleTimeString()) : '');
      li.append(el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'allow', onclick: () => decide('allow', li, 'once') }, 'Allow once'),
        el('button', { type: 'button', class: 'allow-always', onclick: () => decide('allow', li, 'always') }, 'Always allow'),
        el('button', { type: 'button', class: 'deny', onclick: () => decide('deny', li, 'once') }, 'Deny'), result));
      return li;
    }));
    $('approvals-empty').hidden = pending.size > 0;
  }

  // ---- webhooks ----------------------------------------------------------

  // Each webhook's counters, and its recent failures (kept, retryable).
  async function loadWebhooks() {
    try {
      const hooks = listOf(await api('GET', '/api/webhooks'), 'webhooks');
      const rows = await Promise.all(hooks.map(async (w) => {
        let failures = [];
        if (w.failed > 0) {
          try {
            failures = listOf(await api('GET', `/api/webhooks/${encodeURIComponent(w.name)}/deliveries?status=failed&limit=3`), 'deliveries')
              .concat(listOf(await api('GET', `/api/webhooks/${encodeURIComponent(w.name)}/deliveries?status=dead_lettered&limit=3`), 'deliveries'));
          } catch { /* the counters still show */ }
        }
        return el('li', { 'data-webhook': w.name },
          el('div', {}, el('strong', {}, w.name), ` → ${w.host} (${w.filter || 'coordination events'})`),
          el('span', { class: 'muted' }, `delivered ${w.delivered} · queued ${w.queued} · in flight ${w.in_flight} · failed ${w.failed} · dropped ${w.dropped}`),
          w.last_error ? el('span', { class: 'error' }, 'last error: ' + w.last_error) : '',
          ...failures.map((d) => el('code', {}, `${d.event_type} ${d.delivery_id}: ${d.status}`)));
      }));
      $('webhooks').replaceChildren(...rows);
      showLoaded('webhooks', rows.length);
      showError('webhooks-error', null);
    } catch (err) {
      showError('webhooks-error', err.status === 401 ? null : err);
    }
  }

  // ---- MCP servers -------------------------------------------------------

  // /health/ready is 503 while a server is not (yet) connected; its body
  // still lists every server, which is what this panel wants.
  let serverList = [];
  const serverSeen = new Map(); // server name → connects/drops seen in events

  async function loadServers() {
    try {
      const res = await fetch('/health/ready', { cache: 'no-store', credentials: 'omit', headers: { Accept: 'application/json' } });
      if (!res.ok && res.status !== 503) throw new Error(`GET /health/ready: HTTP ${res.status}`);
      serverList = listOf(await res.json(), 'mcp_servers');
      renderServers();
      showError('servers-error', null);
    } catch (err) {
      showError('servers-error', err);
    }
  }

  function renderServers() {
    $('servers').replaceChildren(...serverList.map((s) => {
      const tools = s.tools || [];
      const seen = serverSeen.get(s.name);
      let history = '';
      if (seen && (seen.drops || seen.connects > 1)) {
        history = el('span', { class: 'muted' }, `dropped ${seen.drops}× · reconnected ${Math.max(0, seen.connects - 1)}×` +
          (seen.lastDrop ? ` · last drop ${new Date(seen.lastDrop * 1000).toLocaleTimeString()}` : '') +
          (seen.lastError && seen.lastError !== s.error ? ` (${seen.lastError})` : ''));
      }
      return el('li', { 'data-server': s.name || '', 'data-state': s.connected ? 'connected' : 'disconnected' },
        el('div', {}, el('strong', {}, s.name || '?'), ' ',
          el('span', { class: s.connected ? 'status-ok' : 'status-bad' }, s.connected ? 'connected' : 'not connected'),
          el('span', { class: 'muted' }, ` · ${s.transport || ''} · ${tools.length} tool${tools.length === 1 ? '' : 's'}`)),
        s.error ? el('span', { class: 'error server-error' }, s.error) : '',
        history,
        tools.length ? el('details', {}, el('summary', {}, 'Tools'), el('code', {}, tools.join(', '))) : '');
    }));
    showLoaded('servers', serverList.length);
  }

  function onServerEvent(ev) {
    const p = ev.payload || {};
    if (!p.server) return;
    const seen = serverSeen.get(p.server) || { connects: 0, drops: 0, lastDrop: 0, lastError: '' };
    if (ev.type === 'McpServerConnected') seen.connects++;
    if (ev.type === 'McpServerDisconnected') { seen.drops++; seen.lastDrop = ev.timestamp || 0; seen.lastError = p.error || ''; }
    serverSeen.set(p.server, seen);
  }

  let serversTimer = 0;
  function refreshServersSoon() {
    if (!serversTimer) serversTimer = setTimeout(() => { serversTimer = 0; loadServers(); loadTools(); }, 300);
  }

  // ---- runs --------------------------------------------------------------

  // A run is what happened to one task: built from the events that carry its
  // task_id, history and live alike.
  const RUNS_MAX = 300;
  const runs = new Map(); // task id → run
  const seenTypes = new Set();
  const seenAgents = new Set();

  function runOf(ev) {
    const p = ev.payload || {};
    const task = p.task_id;
    if (!task) return null;
    let r = runs.get(task);
    if (!r) {
      r = { task, agent: p.agent_id || '', source: '', start: ev.timestamp || 0, end: 0, status: 'running',
        output: undefined, error: '', duration: null, tools: [], events: [], types: new Set() };
      runs.set(task, r);
      if (runs.size > RUNS_MAX) {
        const oldest = [...runs.values()].sort((a, b) => a.start - b.start)[0];
        runs.delete(oldest.task);
      }
    }
    return r;
  }

  function addToRun(ev) {
    const r = runOf(ev);
    if (!r) return false;
    const p = ev.payload || {};
    r.events.push(ev);
    r.types.add(ev.type);
    if (p.agent_id && !r.agent) r.agent = p.agent_id;
    if (p.source) r.source = p.source;
    if (ev.timestamp && (!r.start || ev.timestamp < r.start)) r.start = ev.timestamp;
    switch (ev.type) {
      case 'ToolCalled':
        r.tools.push({ tool: p.tool || '?', state: 'called', error: '', duration: null });
        break;
      case 'ToolResult': {
        let t = r.tools.find((x) => x.tool === p.tool && x.state === 'called');
        if (!t) { t = { tool: p.tool || '?' }; r.tools.push(t); }
        t.state = p.ok ? 'ok' : 'error';
        t.error = p.error || '';
        t.duration = p.duration_ms ?? null;
        break;
      }
      // The approval gate runs between ToolCalled and ToolResult, and its
      // events are the only ones that carry a call's arguments.
      case 'ApprovalRequested': {
        let t = [...r.tools].reverse().find((x) => x.tool === p.tool && x.state === 'called' && x.args === undefined);
        if (!t) { t = { tool: p.tool || '?', state: 'called', error: '', duration: null }; r.tools.push(t); }
        t.args = p.arguments ?? '';
        t.argsTruncated = !!p.arguments_truncated;
        t.approvalID = p.approval_id;
        t.approval = 'awaiting approval';
        break;
      }
      case 'ApprovalResolved': {
        const t = r.tools.find((x) => x.approvalID && x.approvalID === p.approval_id);
        if (t) t.approval = p.status || p.decision || 'resolved';
        break;
      }
      case 'TaskCompleted':
        r.status = 'completed';
        r.output = p.output;
        r.duration = p.duration_ms ?? null;
        r.end = ev.timestamp || 0;
        break;
      case 'AgentFailed':
        r.status = p.canceled ? 'canceled' : 'failed';
        r.error = p.error || '';
        r.duration = p.duration_ms ?? null;
        r.end = ev.timestamp || 0;
        break;
    }
    if (r.agent) seenAgents.add(r.agent);
    return true;
  }

  function syncOptions(sel, values) {
    const have = new Set([...sel.options].map((o) => o.value));
    for (const v of [...values].sort()) if (!have.has(v)) sel.append(el('option', { value: v }, v));
  }

  const fmtDuration = (ms) => (ms == null ? '' : ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);

  function renderRuns() {
    syncOptions($('filter-agent'), seenAgents);
    syncOptions($('filter-type'), seenTypes);
    const fa = $('filter-agent').value, ft = $('filter-type').value, fs = $('filter-status').value;
    const list = [...runs.values()]
      .filter((r) => (!fa || r.agent === fa) && (!ft || r.types.has(ft)) && (!fs || r.status === fs))
      .sort((a, b) => b.start - a.start);
    $('runs').replaceChildren(...list.map((r) => {
      const when = r.start ? new Date(r.start * 1000).toLocaleTimeString() : '';
      const out = r.status === 'completed'
        ? el('pre', { class: 'run-output' }, typeof r.output === 'string' ? r.output : JSON.stringify(r.output ?? null, null, 2))
        : r.error ? el('pre', { class: 'run-error' }, r.error) : '';
      return el('li', { 'data-task': r.task, 'data-agent': r.agent, 'data-status': r.status },
        el('div', { class: 'run-head' },
          el('time', {}, when),
          el('strong', { class: 'run-agent' }, r.agent || '?'),
          el('span', { class: 'run-door muted' }, r.source ? 'via ' + r.source : ''),
          el('span', { class: 'run-status outcome-' + r.status }, r.status),
          el('span', { class: 'muted' }, fmtDuration(r.duration)),
          el('span', { class: 'muted run-task' }, 'task ' + r.task)),
        r.tools.length ? el('ul', { class: 'run-tools' }, ...r.tools.map((t) =>
          el('li', { 'data-tool': t.tool, 'data-state': t.state },
            el('code', {}, t.tool),
            t.args !== undefined ? el('code', { class: 'tool-args' }, '(' + (typeof t.args === 'string' ? t.args : JSON.stringify(t.args)) + (t.argsTruncated ? '…' : '') + ')') : '',
            ' ',
            t.approval ? el('span', { class: 'muted tool-approval' }, t.approval + ' · ') : '',
            el('span', { class: 'outcome-' + (t.state === 'ok' ? 'completed' : t.state === 'error' ? 'failed' : 'running') }, t.state),
            t.duration != null ? el('span', { class: 'muted' }, ' ' + fmtDuration(t.duration)) : '',
            t.error ? el('span', { class: 'error' }, ' ' + t.error) : ''))) : '',
        out,
        el('details', { class: 'raw' }, el('summary', {}, `Raw events (${r.events.length})`),
          el('pre', {}, JSON.stringify(r.events, null, 2))));
    }));
    $('runs-empty').hidden = list.length > 0;
    $('runs-empty').textContent = runs.size ? 'No run matches the filter.' : 'No runs yet.';
  }

  let runsTimer = 0;
  function renderRunsSoon() {
    if (!runsTimer) runsTimer = setTimeout(() => { runsTimer = 0; renderRuns(); renderAgents(); }, 100);
  }
  for (const id of ['filter-agent', 'filter-type', 'filter-status']) $(id).addEventListener('change', renderRuns);

  // ---- live events -------------------------------------------------------

  const eventClass = { TaskCompleted: 'ok', AgentFailed: 'fail', ApprovalRequested: 'approval', ApprovalResolved: 'approval' };

  function addToFeed(li) {
    const feed = $('feed');
    feed.prepend(li);
    while (feed.childElementCount > FEED_MAX) feed.lastElementChild.remove();
    $('feed-empty').hidden = true;
  }

  const seenEvents = new Set(); // event ids, so a reconnect's history adds nothing twice

  // onEvent takes one event; fromHistory marks one that happened before this
  // connection (its approvals are already in pending_approvals).
  function onEvent(ev, fromHistory) {
    if (ev.id) {
      if (seenEvents.has(ev.id)) return;
      seenEvents.add(ev.id);
      if (seenEvents.size > 5000) seenEvents.delete(seenEvents.values().next().value);
    }
    if (ev.type) seenTypes.add(ev.type);
    if (addToRun(ev)) renderRunsSoon();
    const when = ev.timestamp ? new Date(ev.timestamp * 1000).toLocaleTimeString() : '';
    let payload = JSON.stringify(ev.payload ?? {});
    if (payload.length > 400) payload = payload.slice(0, 400) + '…';
    addToFeed(el('li', { class: eventClass[ev.type] || '', 'data-type': ev.type || '', 'data-id': ev.id || '' },
      el('time', {}, when), el('span', { class: 'type' }, ev.type || '?'),
      el('span', {}, ev.produced_by || ''), el('code', {}, payload)));

    const p = ev.payload || {};
    if (ev.type === 'McpServerConnected' || ev.type === 'McpServerDisconnected' || ev.type === 'McpToolChanged') { onServerEvent(ev); refreshServersSoon(); }
    if (fromHistory) return;
    if (ev.type === 'ApprovalRequested' && p.approval_id) { pending.set(String(p.approval_id), p); renderApprovals(); }
    if (ev.type === 'ApprovalResolved' && p.approval_id) { pending.delete(String(p.approval_id)); renderApprovals(); }
    if (ev.type === 'AgentActivated' || ev.type === 'TaskCompleted' || ev.type === 'AgentFailed') refreshAgentsSoon();
  }

  let missedTotal = 0;
  function onLagged(missed) {
    const n = Number(missed) || 0;
    missedTotal += n;
    $('lagged-text').textContent = `The live feed fell behind: ${missedTotal} event${missedTotal === 1 ? ' was' : 's were'} missed.`;
    $('lagged').hidden = false;
    addToFeed(el('li', { class: 'lagged', 'data-type': 'lagged' },
      el('time', {}, new Date().toLocaleTimeString()), el('span', { class: 'type' }, 'lagged'),
      el('span', {}, ''), el('code', {}, `${n} missed`)));
    // What was missed may have changed state: read it afresh.
    refreshAgentsSoon();
    loadApprovals();
  }
  $('lagged-dismiss').addEventListener('click', () => { missedTotal = 0; $('lagged').hidden = true; });

  function setConn(state, text) {
    $('conn').dataset.state = state;
    $('conn').textContent = text;
  }

  // One WebSocket at a time; after a drop it reconnects with exponential
  // backoff plus jitter, and resets the backoff once the daemon says ready.
  let ws = null, backoff = BACKOFF_MIN, retryTimer = 0;

  function connect() {
    clearTimeout(retryTimer);
    if (ws) { ws.onclose = null; ws.close(); ws = null; }
    const url = new URL('/api/events', location.href);
    url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    setConn('connecting', 'Connecting…');
    // The token rides as a subprotocol, not in the URL (URLs end up in
    // proxies' logs and the browser's history); the daemon accepts it back.
    const sock = token ? new WebSocket(url, ['axocoatl.bearer.' + token]) : new WebSocket(url);
    ws = sock;
    let ready = false;
    sock.onmessage = (m) => {
      let f;
      try { f = JSON.parse(m.data); } catch { return; }
      if (f.kind === 'ready') {
        ready = true;
        backoff = BACKOFF_MIN;
        setConn('live', 'Live');
        if (Array.isArray(f.pending_approvals)) setPending(f.pending_approvals);
        // The events before this connection, oldest first (absent from an
        // older daemon).
        if (Array.isArray(f.history)) for (const ev of f.history) if (ev) onEvent(ev, true);
      } else if (f.kind === 'event' && f.event) {
        onEvent(f.event);
      } else if (f.kind === 'lagged') {
        onLagged(f.missed);
      } else if (f.kind === 'error' && f.error) {
        addToFeed(el('li', { class: 'fail', 'data-type': 'error' },
          el('time', {}, new Date().toLocaleTimeString()), el('span', { class: 'type' }, 'stream error'),
          el('span', {}, f.error.code || ''), el('code', {}, f.error.message || '')));
      }
    };
    sock.onclose = () => {
      if (ws !== sock) return;
      ws = null;
      // A handshake the daemon refused looks like any other drop to a
      // browser; an API call tells whether the token is the reason.
      if (!ready) loadAgents();
      const delay = backoff * (1 + Math.random() / 5);
      backoff = Math.min(backoff * 2, BACKOFF_MAX);
      setConn('down', `Disconnected; retrying in ${Math.ceil(delay / 1000)} s`);
      retryTimer = setTimeout(() => {
        if ($('auth').hidden) connect();
        else setConn('down', 'Waiting for the API token');
      }, delay);
    };
    // After a reconnect the state may have moved on; read it afresh.
    sock.onopen = () => { loadAgents(); loadTools(); loadServers(); };
  }

  // The agents load once the socket opens (or fails to), so a first visit
  // makes one request for them, not two.
  function start() {
    loadApprovals();
    loadWebhooks();
    setInterval(() => {
      if (document.hidden) return;
      loadWebhooks();
      // A server that is down may come back without an event this tab saw.
      if (serverList.some((s) => !s.connected)) loadServers();
    }, 10000);
    connect();
  }

  renderApprovals();
  start();
})();
