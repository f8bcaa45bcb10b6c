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

  function askToken(message) {
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

  async function loadAgents() {
    try {
      renderAgents(listOf(await api('GET', '/api/agents'), 'agents'));
      showError('agents-error', null);
    } catch (err) {
      showError('agents-error', err);
    }
  }

  function renderAgents(agents) {
    $('agents').replaceChildren(...agents.map((a) => {
      const status = String(a.status || '');
      return el('tr', { 'data-agent': a.id },
        el('td', { title: a.description || '' }, a.name && a.name !== a.id ? `${a.name} (${a.id})` : a.id),
        el('td', {}, a.provider || ''),
        el('td', {}, a.model || '—'),
        el('td', { class: /^[a-z]+$/.test(status) ? 'status-' + status : '' }, status));
    }));
    if (agents.length === 0) $('agents').append(el('tr', {}, el('td', { colspan: '4', class: 'muted' }, 'No agents.')));
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
      $('webhooks-empty').hidden = rows.length > 0;
      showError('webhooks-error', null);
    } catch (err) {
      showError('webhooks-error', err);
    }
  }

  // ---- live events -------------------------------------------------------

  const eventClass = { TaskCompleted: 'ok', AgentFailed: 'fail', ApprovalRequested: 'approval', ApprovalResolved: 'approval' };

  function addToFeed(li) {
    const feed = $('feed');
    feed.prepend(li);
    while (feed.childElementCount > FEED_MAX) feed.lastElementChild.remove();
    $('feed-empty').hidden = true;
  }

  function onEvent(ev) {
    const when = ev.timestamp ? new Date(ev.timestamp * 1000).toLocaleTimeString() : '';
    let payload = JSON.stringify(ev.payload ?? {});
    if (payload.length > 400) payload = payload.slice(0, 400) + '…';
    addToFeed(el('li', { class: eventClass[ev.type] || '', 'data-type': ev.type || '', 'data-id': ev.id || '' },
      el('time', {}, when), el('span', { class: 'type' }, ev.type || '?'),
      el('span', {}, ev.produced_by || ''), el('code', {}, payload)));

    const p = ev.payload || {};
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
    if (token) url.searchParams.set('token', token);
    setConn('connecting', 'Connecting…');
    const sock = new WebSocket(url);
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
    sock.onopen = () => { loadAgents(); };
  }

  // The agents load once the socket opens (or fails to), so a first visit
  // makes one request for them, not two.
  function start() {
    loadApprovals();
    loadWebhooks();
    setInterval(() => { if (!document.hidden) loadWebhooks(); }, 10000);
    connect();
  }

  renderApprovals();
  start();
})();
