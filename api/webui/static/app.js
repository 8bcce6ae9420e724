// The chat page: it lists the server's models, keeps the conversation,
// streams each reply from /v1/chat/completions and shows a thinking
// model's reasoning apart from its answer. Model text reaches the page only
// through markdown.js, which builds nodes and never parses HTML.
(function () {
  'use strict';

  const $ = id => document.getElementById(id);
  const keyName = 'ruvllm.apiKey';
  const settingsName = 'ruvllm.settings';

  // state is the conversation the page holds: the messages sent with the
  // next request (roles user and assistant; the system prompt is added
  // when sent), and the request running now.
  const state = { messages: [], running: null };
  window.ruvllm = Object.assign(window.ruvllm || {}, { state });
  const md = window.ruvllm.markdown;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function setStatus(text, isError) {
    $('status').textContent = text || '';
    $('status').classList.toggle('error', !!isError);
  }

  const sleep = ms => new Promise(r => setTimeout(r, ms));

  // The API key lives in sessionStorage (this tab) or, when the user asks,
  // in localStorage (this browser); it goes out as a Bearer token.
  function apiKey() {
    return sessionStorage.getItem(keyName) || localStorage.getItem(keyName) || '';
  }

  function setKey(key, remember) {
    sessionStorage.removeItem(keyName);
    localStorage.removeItem(keyName);
    if (key) (remember ? localStorage : sessionStorage).setItem(keyName, key);
    $('forget-key').hidden = !key;
  }

  let keyWaiters = [];

  // askKey shows the key dialog; it resolves once a key is given.
  function askKey(message) {
    $('key-message').textContent = message;
    $('key-input').value = '';
    $('key-dialog').hidden = false;
    $('key-input').focus();
    return new Promise(resolve => keyWaiters.push(resolve));
  }

  $('key-form').addEventListener('submit', ev => {
    ev.preventDefault();
    const key = $('key-input').value.trim();
    if (!key) return;
    setKey(key, $('key-remember').checked);
    $('key-dialog').hidden = true;
    const waiters = keyWaiters;
    keyWaiters = [];
    waiters.forEach(w => w());
  });

  $('forget-key').addEventListener('click', () => setKey('', false));

  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // errorOf reads an error response's message (OpenAI's shape).
  async function errorOf(resp) {
    let msg = resp.status + ' ' + resp.statusText;
    try {
      const j = await resp.json();
      if (j && j.error) msg = j.error.message || msg;
    } catch (e) {
      // not JSON: the status says it
    }
    return new APIError(resp.status, msg);
  }

  // api fetches path (relative, so that a proxy may serve the page under a
  // prefix) with the key; a 401 asks for the key and tries again.
  async function api(path, init) {
    init = init || {};
    for (;;) {
      const headers = { 'Content-Type': 'application/json' };
      const key = apiKey();
      if (key) headers.Authorization = 'Bearer ' + key;
      const resp = await fetch(path, Object.assign({}, init, { headers }));
      if (resp.status !== 401) return resp;
      const err = await errorOf(resp);
      setKey('', false);
      await askKey(key ? 'The server refused the key: ' + err.message + '. Type it again.'
        : 'This server needs an API key (its --api-key).');
      if (init.signal && init.signal.aborted) throw new DOMException('stopped', 'AbortError');
    }
  }

  // loadModels fills the model list from /v1/models: the models, their
  // adapters and the router's name; it waits while the server loads.
  async function loadModels() {
    for (;;) {
      let resp;
      try {
        resp = await api('v1/models');
      } catch (e) {
        setStatus('Cannot reach the server: ' + e.message, true);
        await sleep(3000);
        continue;
      }
      if (resp.status === 503) {
        setStatus('The server is loading its models…');
        await sleep(2000);
        continue;
      }
      if (!resp.ok) {
        setStatus('Listing the models: ' + (await errorOf(resp)).message, true);
        return;
      }
      const list = (await resp.json()).data || [];
      const sel = $('model');
      const want = sel.value || localStorage.getItem('ruvllm.model') || '';
      sel.replaceChildren();
      for (const m of list) {
        let label = m.id;
        if (m.parent) label += ' (adapter of ' + m.parent + ')';
        const st = m.status && m.status.value;
        if (st && st !== 'loaded') label += ' · ' + st;
        const o = el('option', '', label);
        o.value = m.id;
        sel.append(o);
      }
      if (list.some(m => m.id === want)) sel.value = want;
      setStatus(list.length ? '' : 'The server serves no model.', !list.length);
      sel.dataset.loaded = 'true';
      return;
    }
  }

  $('model').addEventListener('change', () => localStorage.setItem('ruvllm.model', $('model').value));

  // Settings are kept in this browser between visits.
  const settingIds = ['system', 'temperature', 'top-p', 'max-tokens'];
  try {
    const saved = JSON.parse(localStorage.getItem(settingsName) || '{}');
    for (const id of settingIds) if (typeof saved[id] === 'string') $(id).value = saved[id];
  } catch (e) {
    localStorage.removeItem(settingsName);
  }
  for (const id of settingIds) {
    $(id).addEventListener('change', () => {
      const s = {};
      for (const k of settingIds) s[k] = $(k).value;
      localStorage.setItem(settingsName, JSON.stringify(s));
    });
  }

  // number reads a number field; an empty or invalid one is left out of
  // the request, for the server's default.
  function number(id) {
    const v = $(id).value.trim();
    if (v === '') return undefined;
    const n = Number(v);
    return Number.isFinite(n) ? n : undefined;
  }

  // requestBody is the chat request for the conversation so far.
  function requestBody() {
    const messages = [];
    const system = $('system').value.trim();
    if (system) messages.push({ role: 'system', content: system });
    for (const m of state.messages) messages.push({ role: m.role, content: m.content });
    const body = { model: $('model').value || undefined, messages, stream: true, stream_options: { include_usage: true } };
    const t = number('temperature');
    const p = number('top-p');
    const n = number('max-tokens');
    if (t !== undefined) body.temperature = t;
    if (p !== undefined) body.top_p = p;
    if (n !== undefined) body.max_tokens = Math.round(n);
    return body;
  }

  const messagesBox = $('messages');

  function nearBottom() {
    return messagesBox.scrollHeight - messagesBox.scrollTop - messagesBox.clientHeight < 80;
  }

  function userView(text) {
    const box = el('div', 'message user');
    box.append(el('div', 'role', 'you'), el('div', 'content', text));
    messagesBox.append(box);
    messagesBox.scrollTop = messagesBox.scrollHeight;
    return box;
  }

  // addCopyButtons puts a copy button on each code block.
  function addCopyButtons(root) {
    for (const pre of root.querySelectorAll('pre')) {
      const b = el('button', 'copy', 'copy');
      b.type = 'button';
      b.addEventListener('click', () => {
        const code = pre.querySelector('code');
        if (navigator.clipboard) navigator.clipboard.writeText(code ? code.textContent : '').then(() => { b.textContent = 'copied'; });
      });
      pre.append(b);
    }
  }

  // assistantView is a reply being streamed: its reasoning (collapsible,
  // folded once the answer starts) above its answer, redrawn at most every
  // 40 ms.
  function assistantView() {
    const box = el('div', 'message assistant pending');
    const reasoning = el('details', 'reasoning');
    const summary = el('summary', '', 'Thinking…');
    const reasoningBody = el('div', 'content reasoning-content');
    reasoning.append(summary, reasoningBody);
    reasoning.hidden = true;
    reasoning.open = true;
    const content = el('div', 'content answer');
    const meta = el('div', 'meta');
    box.append(el('div', 'role', 'assistant'), reasoning, content, meta);
    messagesBox.append(box);
    let timer = null;
    let r = '';
    let c = '';
    let folded = false;
    const started = performance.now();
    let thoughtFor = 0;
    function draw() {
      timer = null;
      const stick = nearBottom();
      if (r) {
        reasoning.hidden = false;
        reasoningBody.replaceChildren(md.render(r));
      }
      if (c && r && !folded) {
        folded = true;
        reasoning.open = false;
        thoughtFor = (performance.now() - started) / 1000;
        summary.textContent = 'Reasoning (' + thoughtFor.toFixed(1) + ' s)';
      }
      content.replaceChildren(md.render(c));
      addCopyButtons(content);
      if (stick) messagesBox.scrollTop = messagesBox.scrollHeight;
    }
    return {
      box,
      update(reasoningText, text) {
        r = reasoningText;
        c = text;
        if (!timer) timer = setTimeout(draw, 40);
      },
      finish(info) {
        clearTimeout(timer);
        draw();
        if (r && !folded) summary.textContent = 'Reasoning';
        box.classList.remove('pending');
        box.dataset.done = 'true';
        meta.textContent = info.meta;
        if (info.error) box.append(el('div', 'error', info.error));
      },
    };
  }

  // readSSE calls onData with each "data:" payload of the stream until
  // [DONE].
  async function readSSE(resp, onData) {
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (!line.startsWith('data:')) continue;
        const payload = line.slice(5).trim();
        if (payload === '[DONE]') {
          reader.cancel().catch(() => {});
          return;
        }
        onData(JSON.parse(payload));
      }
    }
  }

  function setRunning(ctrl) {
    state.running = ctrl;
    $('send').disabled = !!ctrl;
    $('stop').disabled = !ctrl;
  }

  // send streams the reply to the conversation with text added to it.
  async function send(text) {
    const user = { role: 'user', content: text };
    // conv is this conversation, even if "New chat" starts another while
    // the reply streams.
    const conv = state.messages;
    conv.push(user);
    const uview = userView(text);
    const view = assistantView();
    const ctrl = new AbortController();
    setRunning(ctrl);
    setStatus('');
    const t0 = performance.now();
    let firstAt = 0;
    let content = '';
    let reasoning = '';
    let usage = null;
    let finish = '';
    let error = '';
    let stopped = false;
    try {
      const resp = await api('v1/chat/completions', { method: 'POST', body: JSON.stringify(requestBody()), signal: ctrl.signal });
      if (!resp.ok) throw await errorOf(resp);
      await readSSE(resp, data => {
        if (data.error) throw new APIError(0, data.error.message || 'the server failed');
        if (data.usage) usage = data.usage;
        for (const ch of data.choices || []) {
          const d = ch.delta || {};
          if (d.reasoning_content) reasoning += d.reasoning_content;
          if (d.content) content += d.content;
          if ((d.reasoning_content || d.content) && !firstAt) firstAt = performance.now();
          if (ch.finish_reason) finish = ch.finish_reason;
        }
        view.update(reasoning, content);
      });
    } catch (e) {
      if (e.name === 'AbortError') stopped = true;
      else error = e.message || String(e);
    }
    setRunning(null);
    const meta = [];
    if (stopped) meta.push('stopped');
    else if (finish === 'length') meta.push('cut at max tokens');
    if (usage) {
      meta.push(usage.completion_tokens + ' tokens');
      const secs = (performance.now() - (firstAt || t0)) / 1000;
      if (firstAt && secs > 0 && usage.completion_tokens > 1) meta.push((usage.completion_tokens / secs).toFixed(1) + ' tokens/s');
    }
    if (firstAt) meta.push('first token after ' + ((firstAt - t0) / 1000).toFixed(2) + ' s');
    view.finish({ meta: meta.join(' · '), error });
    if (content || reasoning) {
      // A stopped reply stays in the conversation as far as it got.
      conv.push({ role: 'assistant', content, reasoning });
    } else if (conv[conv.length - 1] === user) {
      // Nothing came back: the message leaves the conversation and goes
      // back to the input, to send again.
      conv.pop();
      uview.classList.add('failed');
      if (!$('input').value) $('input').value = text;
    }
    if (error) setStatus(error, true);
  }

  $('composer').addEventListener('submit', ev => {
    ev.preventDefault();
    const text = $('input').value;
    if (!text.trim() || state.running) return;
    $('input').value = '';
    send(text);
  });

  $('input').addEventListener('keydown', ev => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $('composer').requestSubmit();
    }
  });

  $('stop').addEventListener('click', () => {
    if (state.running) state.running.abort();
  });

  $('new-chat').addEventListener('click', () => {
    if (state.running) state.running.abort();
    state.messages = [];
    messagesBox.replaceChildren();
    setStatus('');
    $('input').focus();
  });

  $('forget-key').hidden = !apiKey();
  loadModels();
  $('input').focus();
})();
