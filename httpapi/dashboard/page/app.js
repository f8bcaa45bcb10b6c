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
    constructor(status, code, message, conversationID) {
      super(message);
      this.status = status;
      this.code = code;
      // A failed turn is recorded: the error names its conversation.
      this.conversationID = conversationID;
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
      throw new APIError(res.status, e.code || '', e.message || text.trim() || `HTTP ${res.status}`,
        typeof e.conversation_id === 'string' ? e.conversation_id : '');
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
    const convSel = $('conv-agent');
    const convChosen = convSel.value;
    convSel.replaceChildren(el('option', { value: '' }, 'all'), ...agents.map((a) => el('option', { value: a.id }, a.id)));
    convSel.value = agents.some((a) => a.id === convChosen) ? convChosen : '';
    if (convSel.value !== convChosen) { convItems = []; convNext = ''; loadConversations(false); }
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
    // One-shot unless the daemon keeps conversations and one was asked for.
    const body = { input: $('run-input').value };
    if (convAvailable && runConv) body.conversation_id = runConv;
    try {
      // Over the socket the answer grows as the model writes it.
      const r = await execute(id, body, {
        started: (task) => { meta.textContent = `Running ${id} · task ${task}…`; },
        text: (t) => { if (out.dataset.state === 'running') out.textContent = t; },
      });
      meta.textContent = `${r.agent_id || id} · task ${r.task_id || '?'} · ${r.status || 'completed'}` +
        (r.conversation_id ? ` · conversation ${r.conversation_id}` : '');
      out.textContent = typeof r.output === 'string' ? r.output : JSON.stringify(r.output, null, 2);
      out.dataset.state = 'done';
      if (body.conversation_id && typeof r.conversation_id === 'string' && r.conversation_id) {
        // The next input is the conversation's next turn.
        runConv = r.conversation_id;
        runConvAgent = id;
        renderRunConv();
        $('run-input').value = '';
        convChangedSoon(runConv);
      }
    } catch (err) {
      const busy = !!body.conversation_id && err.status === 409 && !/full/i.test(err.code + ' ' + err.message);
      meta.textContent = `${id} · ${busy ? 'busy: another turn of this conversation is running' : 'failed'} (HTTP ${err.status || '?'}${err.code ? ', ' + err.code : ''})`;
      out.textContent = err.message;
      out.dataset.state = 'error';
      if (body.conversation_id && err.conversationID) {
        // The failed turn started or continued a conversation: go on in it.
        meta.textContent += ` · conversation ${err.conversationID}`;
        runConv = err.conversationID;
        runConvAgent = id;
        renderRunConv();
      }
      if (err.status === 404 && body.conversation_id && body.conversation_id !== 'new') conversationGone(body.conversation_id, `Conversation ${body.conversation_id} no longer exists.`);
      else if (body.conversation_id && body.conversation_id !== 'new') convChangedSoon(body.conversation_id);
    } finally {
      button.disabled = false;
    }
  });

  $('run-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('run').requestSubmit();
  });

  // ---- conversations -----------------------------------------------------

  // The conversations API (GET /api/conversations, GET and DELETE
  // /api/conversations/{id}, execute's conversation_id) may be absent from
  // the daemon (an older one): the page offers none of it until the list
  // answers, and a 404 keeps it hidden. What the page holds of it is
  // bounded: CONV_LIST_MAX conversations in the list, MSG_MAX messages of
  // the open one (its newest MSG_PAGE, earlier pages on request up to the
  // bound, the oldest shown dropped as new turns come).
  const CONV_PAGE = 20;
  const CONV_LIST_MAX = 200; // the API's largest page
  const MSG_PAGE = 100;
  const MSG_MAX = 1000;
  const FAILED_TURN = '(this turn failed: '; // how the Engine records a failed turn

  let convAvailable = false;
  let convItems = []; // Info of the listed conversations, newest first
  let convNext = ''; // the cursor of the list's next page
  // open is the conversation shown: its Info, and its messages from index
  // from on. Every open makes a new object, so an answer that comes back
  // for one no longer shown is recognised (cur !== open) and dropped.
  let open = null;
  // runConv is what the run form's next run is: '' one-shot, 'new' the
  // start of a conversation, or the id of the conversation it continues.
  let runConv = '', runConvAgent = '';

  const enc = encodeURIComponent;
  const when = (t) => { const d = new Date(t); return isNaN(d) ? '' : d.toLocaleString(); };
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

  function setConvAvailable(yes) {
    if (convAvailable === yes) return;
    convAvailable = yes;
    $('conversations').hidden = !yes;
    if (!yes) runConv = '';
    renderRunConv();
  }

  function renderRunConv() {
    $('run-conv').hidden = !convAvailable;
    $('run-conv').dataset.state = runConv === '' ? 'off' : runConv === 'new' ? 'new' : 'continuing';
    const text = $('run-conv-text');
    if (runConv === '') text.replaceChildren('One-shot: the agent remembers nothing of this run.');
    else if (runConv === 'new') text.replaceChildren('The next run starts a conversation.');
    else text.replaceChildren('Conversation ', el('code', { id: 'run-conv-id' }, runConv), ': the next input continues it.');
    $('run-conv-new').hidden = runConv === 'new';
    $('run-conv-new').textContent = runConv === '' ? 'New conversation' : 'Start over';
    $('run-conv-open').hidden = runConv === '' || runConv === 'new';
    $('run-conv-off').hidden = runConv === '';
  }
  $('run-conv-new').addEventListener('click', () => { runConv = 'new'; renderRunConv(); $('run-input').focus(); });
  $('run-conv-off').addEventListener('click', () => { runConv = ''; renderRunConv(); });
  $('run-conv-open').addEventListener('click', () => {
    if (!runConv || runConv === 'new') return;
    openConversation(runConv);
    $('conversations').scrollIntoView({ block: 'start' });
  });
  // A conversation belongs to one agent: another agent starts a new one.
  $('run-agent').addEventListener('change', () => {
    if (runConv && runConv !== 'new' && $('run-agent').value !== runConvAgent) { runConv = 'new'; renderRunConv(); }
  });

  // loadConversations reads the list's first pages afresh, or with more
  // the page after those shown. One load at a time, in order (a refresh
  // never drops a "More" asked for meanwhile), and refreshes asked for
  // while one waits are that one.
  let convQueue = Promise.resolve(), convRefreshQueued = false;
  function loadConversations(more) {
    if (!more) {
      if (convRefreshQueued) return convQueue;
      convRefreshQueued = true;
    }
    convQueue = convQueue.then(() => {
      if (!more) convRefreshQueued = false;
      return fetchConversations(more);
    });
    return convQueue;
  }

  async function fetchConversations(more) {
    if (more && !convNext) return;
    const agent = $('conv-agent').value;
    const q = new URLSearchParams();
    if (agent) q.set('agent', agent);
    // A refresh asks for as many as the list shows, so pages read with
    // "More" stay.
    q.set('limit', String(more ? CONV_PAGE : Math.min(CONV_LIST_MAX, Math.max(CONV_PAGE, convItems.length))));
    if (more) q.set('cursor', convNext);
    try {
      const data = await api('GET', '/api/conversations?' + q);
      if ($('conv-agent').value !== agent) return; // the filter changed: a refresh is queued
      setConvAvailable(true);
      const page = listOf(data, 'conversations').filter((c) => c && typeof c.id === 'string');
      // A conversation updated between two pages is on both: keep its
      // newest place.
      const all = more ? convItems.concat(page) : page;
      const seen = new Set();
      convItems = all.filter((c) => !seen.has(c.id) && seen.add(c.id)).slice(0, CONV_LIST_MAX);
      convNext = (data && typeof data.next === 'string' && data.next) || '';
      renderConvList();
      showError('conv-list-error', null);
    } catch (err) {
      if (err.status === 404 || err.status === 405) setConvAvailable(false);
      else if (err.status !== 401) showError('conv-list-error', err);
    }
  }

  function renderConvList() {
    $('conv-list').replaceChildren(...convItems.map((c) => {
      const li = el('li', { 'data-conversation': c.id, 'data-agent': c.agent_id || '' },
        el('button', { type: 'button', class: 'conv-item', onclick: () => openConversation(c.id) },
          el('span', { class: 'conv-item-title' }, c.title || '(no title)'),
          el('span', { class: 'muted' }, [c.agent_id || '?', plural(Number(c.messages) || 0, 'message'),
            when(c.updated), c.source ? 'via ' + c.source : ''].filter(Boolean).join(' · '))));
      if (open && open.id === c.id) li.setAttribute('aria-current', 'true');
      return li;
    }));
    $('conv-empty').hidden = convItems.length > 0;
    $('conv-more').hidden = !convNext || convItems.length >= CONV_LIST_MAX;
  }

  $('conv-agent').addEventListener('change', () => { convItems = []; convNext = ''; loadConversations(false); });
  $('conv-more').addEventListener('click', () => loadConversations(true));

  function setConvStatus(state, text) {
    const s = $('conv-status');
    s.dataset.state = state;
    s.textContent = text;
    s.className = state === 'error' || state === 'busy' || state === 'full' ? 'error' : 'muted';
  }

  function convPath(id, from, limit) {
    return `/api/conversations/${enc(id)}?from=${from}&limit=${limit}`;
  }

  // openConversation shows a conversation: its newest MSG_PAGE messages.
  async function openConversation(id) {
    const cur = { id, info: null, from: 0, messages: [], pending: null, sending: false, refreshing: null, liveTask: '' };
    open = cur;
    $('conv-none').hidden = true;
    $('conv-view').hidden = false;
    $('conv-view').dataset.conversation = id;
    $('conv-title').textContent = id;
    $('conv-meta').textContent = 'Loading…';
    $('conv-messages').replaceChildren();
    $('conv-earlier').hidden = true;
    confirmDelete(false);
    setConvStatus('', '');
    renderConvList();
    try {
      let data = await api('GET', convPath(id, 0, MSG_PAGE));
      if (cur !== open) return;
      const total = Number(data && data.conversation && data.conversation.messages) || 0;
      if (total > MSG_PAGE) {
        cur.from = total - MSG_PAGE;
        data = await api('GET', convPath(id, cur.from, MSG_PAGE));
        if (cur !== open) return;
      }
      cur.info = data.conversation || null;
      cur.messages = listOf(data, 'messages');
      renderMessages(cur);
      // Messages added since (a turn that just ended) come with next_from.
      if (data.next_from != null) await refreshOpen();
    } catch (err) {
      if (cur !== open) return;
      if (err.status === 404) conversationGone(id, `Conversation ${id} no longer exists.`);
      else { $('conv-meta').textContent = ''; setConvStatus('error', err.message); }
    }
  }

  // refreshOpen reads the open conversation's messages after those shown,
  // one refresh at a time so none is added twice.
  function refreshOpen() {
    const cur = open;
    if (!cur || !cur.info) return Promise.resolve();
    cur.refreshing = (cur.refreshing || Promise.resolve()).then(async () => {
      for (let pages = 0; pages < MSG_MAX / MSG_PAGE && cur === open; pages++) {
        let data;
        try {
          data = await api('GET', convPath(cur.id, cur.from + cur.messages.length, MSG_PAGE));
        } catch (err) {
          if (cur !== open) return;
          if (err.status === 404) conversationGone(cur.id, `Conversation ${cur.id} no longer exists.`);
          else setConvStatus('error', 'Could not read the conversation: ' + err.message);
          return;
        }
        if (cur !== open) return;
        cur.info = data.conversation || cur.info;
        cur.messages = cur.messages.concat(listOf(data, 'messages'));
        if (cur.messages.length > MSG_MAX) {
          const drop = cur.messages.length - MSG_MAX;
          cur.messages = cur.messages.slice(drop);
          cur.from += drop;
        }
        renderMessages(cur);
        if (data.next_from == null) return;
      }
    });
    return cur.refreshing;
  }

  $('conv-earlier').addEventListener('click', async () => {
    const cur = open;
    if (!cur || cur.from === 0 || cur.messages.length >= MSG_MAX) return;
    const from = Math.max(0, cur.from - Math.min(MSG_PAGE, MSG_MAX - cur.messages.length));
    try {
      const data = await api('GET', convPath(cur.id, from, cur.from - from));
      if (cur !== open) return;
      cur.messages = listOf(data, 'messages').slice(0, cur.from - from).concat(cur.messages);
      cur.from = from;
      renderMessages(cur, true);
    } catch (err) {
      if (cur === open) setConvStatus('error', err.message);
    }
  });

  const prettyJSON = (v) => {
    if (typeof v === 'string') { try { v = JSON.parse(v); } catch { return v; } }
    return JSON.stringify(v ?? null, null, 2);
  };

  function renderMessages(cur, keepScroll) {
    const info = cur.info || {};
    $('conv-title').textContent = info.title || '(no title)';
    $('conv-meta').textContent = [info.agent_id || '?', plural(Number(info.messages) || 0, 'message'),
      info.source ? 'via ' + info.source : '', info.created ? 'started ' + when(info.created) : '', 'id ' + cur.id].filter(Boolean).join(' · ');
    const names = new Map(); // tool call id → tool name, for its result
    for (const m of cur.messages) {
      for (const c of Array.isArray(m && m.tool_calls) ? m.tool_calls : []) if (c && c.id) names.set(c.id, c.name);
    }
    const items = cur.messages.map((m, i) => messageItem(m || {}, cur.from + i, names));
    if (cur.pending !== null) {
      items.push(el('li', { class: 'msg msg-user msg-pending', 'data-role': 'user', 'data-pending': 'true' },
        el('div', { class: 'msg-head' }, el('span', { class: 'msg-role' }, 'user'), el('span', { class: 'muted' }, 'sending…')),
        el('pre', { class: 'msg-content' }, cur.pending)));
    }
    const lv = liveItem(cur);
    if (lv) items.push(lv);
    // Follow the end as turns come, unless the reader has scrolled up.
    const list = $('conv-messages');
    const follow = !keepScroll && list.scrollHeight - list.scrollTop - list.clientHeight < 48;
    list.replaceChildren(...items);
    if (follow) list.scrollTop = list.scrollHeight;
    $('conv-earlier').hidden = cur.from === 0;
    const full = cur.messages.length >= MSG_MAX;
    $('conv-earlier').disabled = full;
    $('conv-earlier').textContent = full ? `${cur.from} earlier messages (the view holds ${MSG_MAX})` : `Earlier messages (${cur.from})`;
  }

  // liveItem is the answer of the turn running in the open conversation,
  // as the model writes it (none before its first text).
  function liveItem(cur) {
    const r = cur.liveTask ? runs.get(cur.liveTask) : null;
    if (!r || !r.live) return null;
    return el('li', { class: 'msg msg-assistant msg-live', 'data-role': 'assistant', 'data-live': 'true', 'data-task': r.task },
      el('div', { class: 'msg-head' }, el('span', { class: 'msg-role' }, 'assistant'), el('span', { class: 'muted' }, 'writing…'),
        el('span', { class: 'muted' }, 'task ' + r.task)),
      el('pre', { class: 'msg-content' }, r.live + (r.liveCut ? '…' : '')));
  }

  // showLiveMessage updates the live answer in place (a full render per
  // delta would rebuild every message).
  function showLiveMessage(cur) {
    const r = cur.liveTask ? runs.get(cur.liveTask) : null;
    const pre = $('conv-messages').querySelector('li[data-live="true"] pre');
    if (!pre || !r) { renderMessages(cur); return; }
    const list = $('conv-messages');
    const follow = list.scrollHeight - list.scrollTop - list.clientHeight < 48;
    pre.textContent = r.live + (r.liveCut ? '…' : '');
    if (follow) list.scrollTop = list.scrollHeight;
  }

  function messageItem(m, index, names) {
    const role = ['user', 'assistant', 'tool'].includes(m.role) ? m.role : 'other';
    const content = typeof m.content === 'string' ? m.content : '';
    const failed = !!m.is_error || (role === 'assistant' && content.startsWith(FAILED_TURN));
    const tool = role === 'tool' ? names.get(m.tool_call_id) : '';
    const label = role === 'tool' ? 'tool result' + (tool ? ' of ' + tool : '') : role === 'other' ? String(m.role ?? '?') : role;
    const li = el('li', { class: 'msg msg-' + role + (failed ? ' msg-error' : ''), 'data-role': role, 'data-index': String(index) },
      el('div', { class: 'msg-head' },
        el('span', { class: 'msg-role' }, label),
        failed ? el('span', { class: 'error msg-flag' }, 'error') : '',
        m.at ? el('time', { class: 'muted' }, when(m.at)) : '',
        m.task_id ? el('span', { class: 'muted' }, 'task ' + m.task_id) : ''));
    if (failed) li.dataset.error = 'true';
    if (tool) li.dataset.tool = tool;
    if (content) li.append(el('pre', { class: 'msg-content' }, content));
    for (const c of Array.isArray(m.tool_calls) ? m.tool_calls.filter((x) => x && typeof x === 'object') : []) {
      // Arguments can be long: collapsed, one click away.
      li.append(el('details', { class: 'tool-call', 'data-tool': c.name || '' },
        el('summary', {}, 'tool call ', el('code', {}, c.name || '?')),
        el('pre', { class: 'tool-call-args' }, prettyJSON(c.arguments))));
    }
    return li;
  }

  function conversationGone(id, message) {
    convItems = convItems.filter((c) => c.id !== id);
    renderConvList();
    // A list read before it went may still be on its way: read it again.
    loadConversations(false);
    if (runConv === id) { runConv = 'new'; renderRunConv(); }
    if (open && open.id === id) {
      open = null;
      $('conv-view').hidden = true;
      $('conv-none').hidden = false;
      $('conv-none').textContent = message;
    }
  }

  $('conv-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const cur = open;
    const input = $('conv-input').value;
    if (!cur || !cur.info || cur.sending || !input.trim()) return;
    const agent = cur.info.agent_id;
    cur.sending = true;
    cur.pending = input;
    $('conv-send').disabled = true;
    renderMessages(cur);
    setConvStatus('running', `Waiting for ${agent}…`);
    try {
      const r = await execute(agent, { input, conversation_id: cur.id }, {
        started: (task) => { cur.liveTask = task; },
        text: () => { if (cur === open) showLiveMessage(cur); },
      });
      cur.pending = null;
      cur.liveTask = '';
      if (cur !== open) return;
      $('conv-input').value = '';
      setConvStatus('done', `task ${r.task_id || '?'} · ${r.status || 'completed'}`);
      await refreshOpen();
    } catch (err) {
      cur.pending = null;
      cur.liveTask = '';
      if (cur !== open) return;
      renderMessages(cur);
      if (err.status === 409) {
        // Turns of a conversation never overlap: the daemon refuses a
        // second one (busy), or the conversation reached its bound (full).
        const full = /full/i.test(err.code) || /\bfull\b/i.test(err.message);
        if (full) setConvStatus('full', `Not sent: the conversation is full (${err.message}). Start a new one.`);
        else setConvStatus('busy', `Busy: another turn of this conversation is running. Not sent; send it again when that turn ends. (${err.message})`);
      } else if (err.status === 404) {
        conversationGone(cur.id, `Conversation ${cur.id} no longer exists.`);
      } else {
        setConvStatus('error', `Failed (HTTP ${err.status || '?'}${err.code ? ', ' + err.code : ''}): ${err.message}`);
        // A failed turn is recorded too.
        refreshOpen();
      }
    } finally {
      cur.sending = false;
      if (cur === open) $('conv-send').disabled = false;
      convChangedSoon(cur.id);
    }
  });
  $('conv-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('conv-form').requestSubmit();
  });

  function confirmDelete(asking) {
    $('conv-confirm').hidden = !asking;
    $('conv-delete').hidden = asking;
  }
  $('conv-delete').addEventListener('click', () => confirmDelete(true));
  $('conv-delete-no').addEventListener('click', () => confirmDelete(false));
  $('conv-delete-yes').addEventListener('click', async () => {
    const cur = open;
    if (!cur) return;
    $('conv-delete-yes').disabled = true;
    try {
      await api('DELETE', `/api/conversations/${enc(cur.id)}`);
      conversationGone(cur.id, `Conversation ${cur.id} was deleted.`);
    } catch (err) {
      if (err.status === 404) conversationGone(cur.id, `Conversation ${cur.id} no longer exists.`);
      else if (cur === open) setConvStatus('error', 'Not deleted: ' + err.message);
    } finally {
      $('conv-delete-yes').disabled = false;
      if (cur === open) confirmDelete(false);
    }
  });

  // A turn that ends anywhere (this page, another tab, A2A, MCP) refreshes
  // the list and, when it is the open one, the conversation: at most every
  // 300 ms, whatever the rate of events.
  let convTimer = 0, openDirty = false;
  function convChangedSoon(id) {
    if (open && open.id === id) openDirty = true;
    if (convTimer) return;
    convTimer = setTimeout(() => {
      convTimer = 0;
      if (!convAvailable) return;
      loadConversations(false);
      if (openDirty) { openDirty = false; refreshOpen(); }
    }, 300);
  }

  function onConversationEvent(ev) {
    const p = ev.payload || {};
    const id = p.conversation_id;
    if (typeof id !== 'string' || !id) return;
    const cur = open;
    if (ev.type === 'AgentActivated') {
      if (cur && cur.id === id && !cur.sending) {
        setConvStatus('running', `A turn is running: task ${p.task_id || '?'}${p.source ? ' via ' + p.source : ''}…`);
        if (p.task_id) cur.liveTask = String(p.task_id);
      }
      return;
    }
    if (cur && cur.liveTask && cur.liveTask === p.task_id && !cur.sending) {
      // The recorded turn replaces its live answer once read.
      cur.liveTask = '';
    }
    if (cur && cur.id === id && !cur.sending && $('conv-status').dataset.state === 'busy') {
      setConvStatus('done', 'The other turn has ended: yours can be sent now.');
    }
    if (cur && cur.id === id && !cur.sending && $('conv-status').dataset.state === 'running') {
      setConvStatus(ev.type === 'AgentFailed' ? 'error' : 'done', ev.type === 'AgentFailed' ? 'The turn failed: ' + (p.error || '') : `task ${p.task_id || '?'} · completed`);
    }
    convChangedSoon(id);
  }

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
      if (a.kind === 'question') return questionItem(id, a);
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

  // A question from an MCP server (kind "question"): its requested schema,
  // flat primitive properties as MCP form elicitation allows, as a form.
  // Submit sends {decision: "allow", content}; Decline {decision: "deny"}.
  // The server checks the answer against the schema too (400 says why).
  function questionItem(id, a) {
    const schema = a.schema && typeof a.schema === 'object' ? a.schema : {};
    const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const result = el('span', { class: 'error' });
    const fields = [];
    const form = el('form', { class: 'question-form' });
    for (const [name, p0] of Object.entries(props)) {
      const p = p0 && typeof p0 === 'object' ? p0 : {};
      const label = String(p.title || name);
      const req = required.has(name);
      let input;
      const choices = Array.isArray(p.oneOf) ? p.oneOf.map((o) => [o && o.const, String((o && (o.title ?? o.const)) ?? '')])
        : Array.isArray(p.enum) ? p.enum.map((v, i) => [v, String((Array.isArray(p.enumNames) && p.enumNames[i]) || v)]) : null;
      if (p.type === 'boolean') {
        input = el('input', { type: 'checkbox', name });
        input.checked = p.default === true;
      } else if (choices) {
        input = el('select', { name });
        if (!req || p.default === undefined) input.append(el('option', { value: '' }, req ? 'Choose…' : '—'));
        choices.forEach(([v, title], i) => {
          const o = el('option', { value: String(i) }, title);
          if (p.default !== undefined && p.default === v) o.selected = true;
          input.append(o);
        });
        input.choices = choices;
      } else if (p.type === 'number' || p.type === 'integer') {
        input = el('input', { type: 'number', name, step: p.type === 'integer' ? '1' : 'any' });
        if (typeof p.minimum === 'number') input.min = String(p.minimum);
        if (typeof p.maximum === 'number') input.max = String(p.maximum);
        if (typeof p.default === 'number') input.value = String(p.default);
      } else {
        const type = { email: 'email', uri: 'url', date: 'date' }[p.format] || 'text';
        input = el('input', { type, name });
        if (typeof p.minLength === 'number') input.minLength = p.minLength;
        if (typeof p.maxLength === 'number') input.maxLength = p.maxLength;
        if (typeof p.default === 'string') input.value = p.default;
        if (p.format === 'date-time') input.placeholder = 'YYYY-MM-DDThh:mm:ssZ';
      }
      if (req && p.type !== 'boolean') input.required = true;
      fields.push([name, p, input]);
      form.append(el('label', {}, label + (req ? ' *' : ''), ' ', input,
        p.description ? el('span', { class: 'muted' }, ' ' + String(p.description)) : ''));
    }
    const content = () => {
      const out = {};
      for (const [name, p, input] of fields) {
        if (p.type === 'boolean') { out[name] = input.checked; continue; }
        if (input.choices) { if (input.value !== '') out[name] = input.choices[Number(input.value)][0]; continue; }
        if (input.value === '') continue; // not given: the schema's default, if any
        out[name] = p.type === 'number' || p.type === 'integer' ? Number(input.value) : input.value;
      }
      return out;
    };
    const li = el('li', { 'data-approval': id, 'data-question': id });
    const send = async (body) => {
      for (const b of li.querySelectorAll('button')) b.disabled = true;
      try {
        await api('POST', `/api/approvals/${encodeURIComponent(id)}`, body);
        pending.delete(id);
        renderApprovals();
      } catch (err) {
        if (err.status === 409 || err.status === 404) { pending.delete(id); renderApprovals(); return; }
        result.textContent = err.message;
        for (const b of li.querySelectorAll('button')) b.disabled = false;
      }
    };
    form.addEventListener('submit', (ev) => { ev.preventDefault(); send({ decision: 'allow', content: content() }); });
    form.append(el('div', { class: 'actions' },
      el('button', { type: 'submit', class: 'allow' }, 'Submit'),
      el('button', { type: 'button', class: 'deny', onclick: () => send({ decision: 'deny' }) }, 'Decline'), result));
    const during = a.tool ? ` during ${a.tool} for agent ${a.agent_id || '?'}` : '';
    li.append(
      el('div', {}, el('strong', {}, 'Question'), ` from MCP server ${a.server || '?'}${during}`),
      el('p', { class: 'question-message' }, String(a.message || '')),
      form,
      a.expires_at ? el('span', { class: 'muted' }, 'declined if unanswered by ' + new Date(a.expires_at).toLocaleTimeString()) : '');
    return li;
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
      const needsLogin = !s.connected && !!s.needs_login;
      const state = s.connected ? 'connected' : needsLogin ? 'needs-login' : 'disconnected';
      const lg = logins.get(s.name);
      let connect = '';
      if (needsLogin) {
        connect = el('div', { class: 'server-login' },
          el('button', { type: 'button', class: 'server-connect', onclick: () => connectServer(s.name) },
            lg && lg.state === 'pending' ? 'Connect again' : 'Connect'),
          lg && lg.url ? el('a', { href: lg.url, target: '_blank', rel: 'noopener noreferrer', class: 'server-login-url' }, 'open the login page') : '',
          lg && lg.text ? el('span', { class: lg.state === 'failed' ? 'error server-login-status' : 'muted server-login-status' }, lg.text) : '');
      }
      return el('li', { 'data-server': s.name || '', 'data-state': state },
        el('div', {}, el('strong', {}, s.name || '?'), ' ',
          el('span', { class: s.connected ? 'status-ok' : 'status-bad' }, s.connected ? 'connected' : needsLogin ? 'needs login' : 'not connected'),
          el('span', { class: 'muted' }, ` · ${s.transport || ''} · ${tools.length} tool${tools.length === 1 ? '' : 's'}`)),
        s.error ? el('span', { class: 'error server-error' }, s.error) : '',
        connect,
        history,
        tools.length ? el('details', {}, el('summary', {}, 'Tools'), el('code', {}, tools.join(', '))) : '');
    }));
    showLoaded('servers', serverList.length);
  }

  // A login to a server behind OAuth (POST /api/mcp/servers/{name}/login,
  // admin): the authorization URL opens in a window of its own, the
  // authorization server sends the user back to the daemon's
  // /oauth/callback, and the server connects (its McpServerConnected event
  // reloads the panel). The window is opened on the click, before the
  // request, so that no popup blocker stops it; it gets no handle on this
  // page. Without it, the link is shown.
  const logins = new Map(); // server name → { state, url, text }
  const LOGIN_POLL = 1000, LOGIN_POLLS = 600;

  async function connectServer(name) {
    const path = '/api/mcp/servers/' + encodeURIComponent(name) + '/login';
    let win = null;
    try { win = window.open('', 'axocoatl-login-' + name); } catch { win = null; }
    logins.set(name, { state: 'pending', url: '', text: 'Starting the login…' });
    renderServers();
    let st;
    try {
      st = await api('POST', path);
    } catch (err) {
      if (win) win.close();
      logins.set(name, { state: 'failed', url: '', text: String(err.message || err) });
      renderServers();
      return;
    }
    const url = st && typeof st.url === 'string' && /^https?:\/\//i.test(st.url) ? st.url : '';
    if (!url) {
      if (win) win.close();
      logins.set(name, { state: 'failed', url: '', text: 'The daemon gave no login page to open.' });
      renderServers();
      return;
    }
    if (win) {
      win.opener = null;
      win.location.href = url;
    }
    logins.set(name, { state: 'pending', url, text: 'Waiting for the login in the other window…' });
    renderServers();
    for (let i = 0; i < LOGIN_POLLS; i++) {
      await new Promise((r) => setTimeout(r, LOGIN_POLL));
      const cur = logins.get(name);
      if (!cur || cur.url !== url) return; // another login replaced this one
      let now;
      try { now = await api('GET', path); } catch { continue; }
      if (now.state === 'done') {
        logins.delete(name);
        loadServers();
        return;
      }
      if (now.state !== 'pending') {
        logins.set(name, { state: 'failed', url: '', text: now.error || `The login ended (${now.state}).` });
        renderServers();
        return;
      }
    }
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
      r = newRun(task, p.agent_id || '', ev.timestamp || 0);
    }
    return r;
  }

  // live is the text of a run as the model writes it (the socket's delta
  // frames), kept up to LIVE_MAX characters; the run's output replaces it
  // when it ends.
  const LIVE_MAX = 100000;

  function newRun(task, agent, start) {
    const r = { task, agent, source: '', start, end: 0, status: 'running',
      output: undefined, error: '', duration: null, tools: [], events: [], types: new Set(),
      live: '', liveCut: false, liveBreak: false };
    runs.set(task, r);
    if (runs.size > RUNS_MAX) {
      const oldest = [...runs.values()].sort((a, b) => a.start - b.start)[0];
      runs.delete(oldest.task);
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
        if (p.kind === 'question') { // a server's question during the call: its arguments are not known here
          const q = [...r.tools].reverse().find((x) => x.tool === p.tool && x.state === 'called');
          if (q) { q.approvalID = p.approval_id; q.question = true; q.approval = 'asking the user'; }
          break;
        }
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
        if (t) t.approval = t.question ? ({ approved: 'answered', denied: 'declined', expired: 'unanswered: declined' }[p.status] || p.status || 'resolved') : (p.status || p.decision || 'resolved');
        break;
      }
      case 'TaskCompleted':
        // The output replaces the live text (kept for the turn the open
        // conversation shows until it is read).
        if (!(open && open.liveTask === r.task)) r.live = '';
        r.status = 'completed';
        r.output = p.output;
        r.duration = p.duration_ms ?? null;
        r.usage = p.usage || null;
        r.end = ev.timestamp || 0;
        break;
      case 'AgentFailed':
        if (!(open && open.liveTask === r.task)) r.live = '';
        r.status = p.canceled ? 'canceled' : 'failed';
        r.error = p.error || '';
        r.duration = p.duration_ms ?? null;
        r.usage = p.usage || null;
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

  // The tokens a run's model calls used, as TaskCompleted and AgentFailed
  // carry them ("" when the provider reported none).
  const fmtUsage = (u) => {
    if (!u || !(u.input_tokens || u.output_tokens)) return '';
    const cached = u.cached_input_tokens ? `, ${u.cached_input_tokens} cached` : '';
    return `${u.input_tokens} in${cached} / ${u.output_tokens} out tokens`;
  };

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
      const attrs = { 'data-task': r.task, 'data-agent': r.agent, 'data-status': r.status };
      if (r.task === tlTask) attrs['aria-current'] = 'true';
      const out = r.status === 'completed'
        ? el('pre', { class: 'run-output' }, typeof r.output === 'string' ? r.output : JSON.stringify(r.output ?? null, null, 2))
        : r.error ? el('pre', { class: 'run-error' }, r.error)
          : r.status === 'running' && r.live ? el('pre', { class: 'run-output run-live', 'data-live': 'true' }, r.live + (r.liveCut ? '…' : '')) : '';
      return el('li', attrs,
        el('div', { class: 'run-head' },
          el('time', {}, when),
          el('strong', { class: 'run-agent' }, r.agent || '?'),
          el('span', { class: 'run-door muted' }, r.source ? 'via ' + r.source : ''),
          el('span', { class: 'run-status outcome-' + r.status }, r.status),
          el('span', { class: 'muted' }, fmtDuration(r.duration)),
          el('span', { class: 'muted run-usage' }, fmtUsage(r.usage)),
          el('span', { class: 'muted run-task' }, 'task ' + r.task),
          el('button', { type: 'button', class: 'secondary run-timeline', onclick: () => openTimeline(r.task) }, 'Timeline')),
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

  // ---- run timeline ------------------------------------------------------

  // One run as a waterfall (GET /api/runs/{id}/timeline): its model
  // calls, tool calls, approval waits and webhook deliveries, each a bar
  // placed by its offset from the run's start and as wide as it lasted. It
  // is read again on each event of the run, and every second while the
  // run or one of its deliveries is still going.
  let tlTask = '', tlTimer = 0, tlSoon = 0, tlSeq = 0;
  const TL_KINDS = { run: 'run', model: 'model', tool: 'tool', approval: 'approval', question: 'question', webhook: 'webhook' };
  const TL_FINAL = new Set(['delivered', 'failed', 'dead_lettered']);

  function openTimeline(task) {
    if (!task) return;
    tlTask = task;
    $('timeline').hidden = false;
    $('timeline').dataset.task = task;
    $('tl-title').textContent = '· task ' + task;
    $('tl-meta').textContent = 'Loading…';
    $('tl-rows').replaceChildren();
    $('tl-axis').replaceChildren();
    showError('tl-error', null);
    loadTimeline();
    renderRuns();
    $('timeline').scrollIntoView({ block: 'nearest' });
  }

  function closeTimeline() {
    tlTask = '';
    clearTimeout(tlTimer);
    clearTimeout(tlSoon);
    tlTimer = tlSoon = 0;
    $('timeline').hidden = true;
    delete $('timeline').dataset.task;
    renderRuns();
  }
  $('tl-close').addEventListener('click', closeTimeline);

  // timelineSoon reads the open timeline again shortly after an event of
  // its run (at most every 250 ms).
  function timelineSoon(task) {
    if (task && task === tlTask && !tlSoon) tlSoon = setTimeout(() => { tlSoon = 0; loadTimeline(); }, 250);
  }

  async function loadTimeline() {
    const task = tlTask;
    if (!task) return;
    clearTimeout(tlTimer);
    tlTimer = 0;
    const seq = ++tlSeq;
    try {
      const tl = await api('GET', `/api/runs/${encodeURIComponent(task)}/timeline`);
      if (seq !== tlSeq || task !== tlTask) return; // another was opened meanwhile
      renderTimeline(tl || {});
      showError('tl-error', null);
      const going = tl && (tl.status === 'running' ||
        listOf(tl, 'rows').some((r) => r && r.kind === 'webhook' && !TL_FINAL.has(r.status)));
      if (going) tlTimer = setTimeout(loadTimeline, 1000);
    } catch (err) {
      if (seq !== tlSeq || task !== tlTask) return;
      $('tl-meta').textContent = '';
      showError('tl-error', err.status === 404 ? 'No timeline of this run: the daemon keeps those of its latest runs only.' : err);
    }
  }

  const tlNum = (v) => (typeof v === 'number' && isFinite(v) && v > 0 ? v : 0);
  const fmtMS = (ms) => (ms < 10 ? `${ms.toFixed(1)} ms` : ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`);

  function renderTimeline(tl) {
    const rows = listOf(tl, 'rows').filter((r) => r && typeof r === 'object');
    let total = tlNum(tl.duration_ms);
    for (const r of rows) {
      total = Math.max(total, tlNum(r.start_ms) + tlNum(r.duration_ms));
      for (const a of Array.isArray(r.attempts) ? r.attempts : []) total = Math.max(total, tlNum(a.start_ms) + tlNum(a.duration_ms));
    }
    total = total || 1;
    const pct = (v) => Math.min(100, (tlNum(v) / total) * 100);
    const place = (n, start, dur) => {
      // CSSOM, not a style attribute: the page's policy allows no inline style.
      n.style.left = Math.min(pct(start), 99.5) + '%';
      n.style.width = pct(dur) + '%';
      return n;
    };
    const status = String(tl.status || '');
    $('tl-meta').replaceChildren(
      el('strong', {}, String(tl.agent_id || '?')),
      tl.source ? ` via ${tl.source}` : '', ' · ',
      el('span', { class: 'outcome-' + status }, status), ' · ',
      fmtMS(tlNum(tl.duration_ms)),
      fmtUsage(tl.usage) ? ' · ' + fmtUsage(tl.usage) : '',
      tl.started_at ? ' · started ' + when(tl.started_at) : '',
      tl.dropped ? ` · ${tl.dropped} rows past the bound not kept` : '',
      tl.missed ? ` · the daemon missed ${tl.missed} events: rows may be lacking` : '');
    $('tl-axis').replaceChildren(...[0, 0.25, 0.5, 0.75, 1].map((f) => {
      const tick = el('span', { class: 'tl-tick' }, fmtMS(total * f));
      tick.style.left = f * 100 + '%';
      return tick;
    }));
    $('tl-rows').replaceChildren(...rows.map((r) => {
      const kind = TL_KINDS[r.kind] || 'other';
      const st = String(r.status || '');
      const dur = tlNum(r.duration_ms);
      const bar = place(el('span', { class: 'tl-bar', title: `${r.name || ''}: ${fmtMS(dur)} from ${fmtMS(tlNum(r.start_ms))}` }), r.start_ms, r.duration_ms);
      const attempts = (Array.isArray(r.attempts) ? r.attempts : []).map((a, i) => place(el('span', {
        class: 'tl-attempt' + (a.status_code >= 200 && a.status_code < 300 ? '' : ' bad'),
        title: `attempt ${i + 1}: ${a.status_code ? 'HTTP ' + a.status_code : 'no response'}${a.error ? ' (' + a.error + ')' : ''} in ${fmtMS(tlNum(a.duration_ms))}`,
      }), a.start_ms, a.duration_ms));
      const info = [fmtMS(dur)];
      if (fmtUsage(r.tokens)) info.push(fmtUsage(r.tokens));
      let what = st;
      if ((kind === 'approval' || kind === 'question') && r.by) what += ' by ' + r.by;
      if (kind === 'webhook' && attempts.length) what += ' · ' + r.attempts.map((a) => a.status_code || '—').join(' → ');
      info.push(what);
      return el('li', { class: 'tl-row', 'data-kind': kind, 'data-status': st },
        el('span', { class: 'tl-label', title: String(r.name || '') },
          el('span', { class: 'tl-kind' }, kind), el('code', {}, String(r.name || '?')),
          r.detail ? el('span', { class: 'muted' }, ' ' + r.detail) : ''),
        el('span', { class: 'tl-track' }, bar, ...attempts),
        el('span', { class: 'tl-info' }, info.join(' · '), r.error ? el('span', { class: 'error' }, ' ' + r.error) : ''));
    }));
  }

  // ---- live runs ---------------------------------------------------------

  // The socket carries the text of runs as the model writes it: of the
  // runs this page starts over it (execute), and of those it follows by
  // task id: every run it sees start while it is connected, at most
  // FOLLOW_MAX at once (the daemon takes 16 a socket). A run started
  // elsewhere streams from its next model call on: a call already under
  // way when the page joined gives its text with the run's end.
  const FOLLOW_MAX = 8;
  const SOCKET_INPUT_MAX = 48000; // bytes; the daemon reads frames up to 64 KiB
  const LIVE_KINDS = new Set(['run_started', 'following', 'delta', 'tool_call_started', 'tool_call_finished', 'usage', 'result', 'run_error', 'run_end']);
  const FOLLOW_ERRORS = new Set(['not_running', 'already_following', 'too_many_runs', 'too_many_listeners']);
  let wsCommands = new Set(); // the cmds the daemon's socket takes (its ready frame)
  const execs = new Map(); // ref → a run started over the socket
  const execByTask = new Map(); // task id → the same
  const followed = new Set(); // task ids followed
  let refSeq = 0;

  function socketTakes(cmd) { return !!ws && ws.readyState === WebSocket.OPEN && wsCommands.has(cmd); }

  // execute runs an agent: over the socket when the daemon takes it there
  // (hooks.started(task) once it runs, hooks.text(text so far) as it
  // grows), else (an older daemon, the socket down, an input too large
  // for a frame) as one POST. Either way it resolves to execute's answer
  // or rejects with an APIError of its status and error.
  function execute(agent, body, hooks) {
    const input = String(body.input ?? '');
    if (!socketTakes('execute') || new TextEncoder().encode(input).length > SOCKET_INPUT_MAX) {
      return api('POST', `/api/agents/${encodeURIComponent(agent)}/execute`, body);
    }
    const viaSocket = new Promise((resolve, reject) => {
      const ref = 'r' + (++refSeq);
      const f = { cmd: 'execute', ref, agent_id: agent, input };
      if (body.conversation_id) f.conversation_id = body.conversation_id;
      execs.set(ref, { ref, resolve, reject, hooks: hooks || {}, task: '', sock: ws });
      ws.send(JSON.stringify(f));
    });
    // A socket busy with its bound of runs: the run goes as a POST.
    return viaSocket.catch((err) => {
      if (err.code === 'too_many_runs') return api('POST', `/api/agents/${encodeURIComponent(agent)}/execute`, body);
      throw err;
    });
  }

  function follow(task) {
    if (!task || followed.has(task) || execByTask.has(task) || followed.size >= FOLLOW_MAX || !socketTakes('follow')) return;
    followed.add(task);
    ws.send(JSON.stringify({ cmd: 'follow', task_id: task }));
  }

  // socketGone fails the runs started over sock (the daemon cancels them
  // with it) and forgets the follows.
  function socketGone(sock) {
    for (const [ref, x] of execs) {
      if (x.sock !== sock) continue;
      execs.delete(ref);
      execByTask.delete(x.task);
      x.reject(new APIError(0, 'disconnected', 'The connection to the daemon dropped: the run was cancelled.', ''));
    }
    followed.clear();
    wsCommands = new Set();
  }

  function onLiveFrame(f) {
    const task = typeof f.task_id === 'string' ? f.task_id : '';
    switch (f.kind) {
      case 'run_started': {
        const x = execs.get(f.ref);
        if (!x || !task) return;
        x.task = task;
        execByTask.set(task, x);
        if (!runs.has(task)) newRun(task, String(f.agent_id || ''), Date.now() / 1000);
        renderRunsSoon();
        if (x.hooks.started) x.hooks.started(task);
        return;
      }
      case 'delta': {
        const r = runs.get(task);
        if (!r || r.status !== 'running') return; // ended: its output is whole
        let t = String(f.text ?? '');
        if (r.liveBreak && r.live) t = '\n' + t;
        r.liveBreak = false;
        if (r.live.length + t.length > LIVE_MAX) {
          t = t.slice(0, Math.max(0, LIVE_MAX - r.live.length));
          r.liveCut = true;
        }
        r.live += t;
        showLive(task);
        return;
      }
      case 'tool_call_started': {
        const r = runs.get(task);
        if (r) r.liveBreak = true;
        return;
      }
      case 'result':
      case 'run_error': {
        const x = execs.get(f.ref);
        if (!x) return;
        execs.delete(f.ref);
        execByTask.delete(x.task);
        if (f.kind === 'result') { x.resolve(f.result || {}); return; }
        const e = f.error || {};
        x.reject(new APIError(Number(f.status) || 0, e.code || '', e.message || 'the run failed',
          typeof e.conversation_id === 'string' ? e.conversation_id : ''));
        return;
      }
      case 'run_end':
        followed.delete(task);
    }
  }

  // The live text shows at most every 50 ms, in place: in the runs list,
  // the run form's output, the open conversation.
  let liveTimer = 0;
  const liveDirty = new Set();
  function showLive(task) {
    liveDirty.add(task);
    if (!liveTimer) liveTimer = setTimeout(flushLive, 50);
  }
  function flushLive() {
    liveTimer = 0;
    for (const task of liveDirty) {
      const r = runs.get(task);
      if (!r) continue;
      const text = r.live + (r.liveCut ? '…' : '');
      const li = [...$('runs').children].find((x) => x.dataset.task === task);
      const pre = li && li.querySelector('pre[data-live="true"]');
      if (pre) pre.textContent = text;
      else renderRunsSoon();
      const x = execByTask.get(task);
      if (x && x.hooks.text) x.hooks.text(text);
      if (open && open.liveTask === task) showLiveMessage(open);
    }
    liveDirty.clear();
  }

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
    if (addToRun(ev)) { renderRunsSoon(); timelineSoon(String((ev.payload || {}).task_id || '')); }
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
    if (ev.type === 'AgentActivated' && p.task_id) follow(String(p.task_id));
    if (ev.type === 'AgentActivated' || ev.type === 'TaskCompleted' || ev.type === 'AgentFailed') { refreshAgentsSoon(); onConversationEvent(ev); }
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
    if (convAvailable) { loadConversations(false); refreshOpen(); }
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
    if (ws) { socketGone(ws); ws.onclose = null; ws.close(); ws = null; }
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
        wsCommands = new Set(Array.isArray(f.commands) ? f.commands.map(String) : []);
        // Runs still going when the page (re)connected: followed from here.
        for (const r of runs.values()) if (r.status === 'running') follow(r.task);
      } else if (f.kind === 'event' && f.event) {
        onEvent(f.event);
      } else if (LIVE_KINDS.has(f.kind)) {
        onLiveFrame(f);
      } else if (f.kind === 'error' && f.error && FOLLOW_ERRORS.has(f.error.code) && followed.has(f.error.task_id)) {
        followed.delete(f.error.task_id); // a run that ended meanwhile, or this socket is full
      } else if (f.kind === 'lagged') {
        onLagged(f.missed);
      } else if (f.kind === 'error' && f.error) {
        addToFeed(el('li', { class: 'fail', 'data-type': 'error' },
          el('time', {}, new Date().toLocaleTimeString()), el('span', { class: 'type' }, 'stream error'),
          el('span', {}, f.error.code || ''), el('code', {}, f.error.message || '')));
      }
    };
    sock.onclose = () => {
      socketGone(sock);
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
    sock.onopen = () => {
      loadAgents(); loadTools(); loadServers();
      if (convAvailable) { loadConversations(false); refreshOpen(); }
    };
  }

  // What the token may do (GET /api/whoami): the page hides the controls
  // of a scope it lacks (body[data-cannot~="execute"], see style.css); the
  // daemon refuses them anyway. The API lists only the agents it sees.
  async function loadIdentity() {
    try {
      const who = await api('GET', '/api/whoami');
      const scopes = new Set((who && who.scopes) || []);
      const can = (s) => scopes.has(s) || scopes.has('admin');
      document.body.dataset.cannot = ['execute', 'approve', 'admin'].filter((s) => !can(s)).join(' ');
      $('whoami').textContent = who && who.name ? `Signed in as ${who.name} (${[...scopes].join(', ')})` : '';
    } catch { /* an older daemon: show everything */ }
  }

  // The agents load once the socket opens (or fails to), so a first visit
  // makes one request for them, not two.
  function start() {
    loadIdentity();
    loadApprovals();
    loadWebhooks();
    loadConversations(false);
    setInterval(() => {
      if (document.hidden) return;
      loadWebhooks();
      // A server that is down may come back without an event this tab saw.
      if (serverList.some((s) => !s.connected)) loadServers();
    }, 10000);
    connect();
  }

  renderApprovals();
  renderRunConv();
  start();
})();
