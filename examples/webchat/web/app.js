// planround webchat: the page. No framework, no build step.
//
// Safety rule: text from the model, a tool or the user is only ever put
// into the page with textContent / append(string), never parsed as HTML.
'use strict';

(() => {
  const AUTO_KEY = 'planround.webchat.autoApprove';
  const SESSION_KEY = 'planround.webchat.session';
  const SPEECH_KEY = 'planround.webchat.speech';
  const SKILLS_KEY = 'planround.webchat.skills';
  const INTERRUPT_FALLBACK_MS = 15000;
  const RECONNECT_MS = 2000;
  const OFFLINE_NOTE = 'The server cannot be reached: you can decide once the page is connected again.';

  const $ = (id) => document.getElementById(id);
  const ui = {
    scroll: $('scroll'), messages: $('messages'), empty: $('empty'),
    form: $('form'), input: $('input'), send: $('send'), interrupt: $('interrupt'),
    model: $('model'), conn: $('conn'), session: $('session'),
    auto: $('auto'), autoList: $('auto-list'), newChat: $('new-chat'),
    mcp: $('mcp'), mcpPanel: $('mcp-panel'), speech: $('speech'),
    sidebar: $('sidebar'), sidebarToggle: $('sidebar-toggle'), sessions: $('sessions'),
    sessionsStatus: $('sessions-status'), import: $('import'), importFile: $('import-file'),
    skillsBox: $('skills-box'), skills: $('skills'),
    audit: $('audit'), auditPanel: $('audit-panel'),
    apilog: $('apilog'), logPanel: $('log-panel'),
    attach: $('attach'), resourcePanel: $('resource-panel'), attached: $('attached'),
  };

  const st = {
    sessionId: '',
    es: null,
    reconnectTimer: null,
    connected: false,
    // offline: the event stream broke and is not back (its EventSource
    // errs or reconnects). A decision sent now may not reach the server,
    // and the page would not hear what became of it: the cards' and forms'
    // buttons are disabled, and say why, until hello comes again.
    offline: false,
    instance: '',
    log: '', // the turn log the event numbers belong to (hello's log)
    running: false,
    interrupting: false,
    interruptTimer: null,
    turn: null, // the live turn's element
    top: null, // the live turn's scope: {body, textEl, reasonEl} (see scopeOf)
    turnId: 0, // the number of the live turn's run_started event
    openTurn: null, // a turn that is not running but waits for decisions on its cards
    lastSeq: 0, // the number of the last event of the session's turn log this page has
    sent: null, // the message this page sent, until its run_started comes
    reloads: [], // when the server last asked for a reload (see onReload)
    cards: new Map(), // card key → card, for the current run and a turn that waits (see cardKey)
    forms: new Map(), // form id → form, for the current run
    autoApprove: loadAuto(),
    mcp: [], // the MCP servers, as GET /api/mcp/servers last said
    attachedRes: [], // the resources the next message attaches: [{server, uri, name}]
    resourcesSeq: 0, // the latest GET /api/mcp/resources: older answers are dropped
    sentAttached: false, // the message this page sent attached resources
    sessions: [], // this browser's stored conversations, as GET /api/sessions last said
    sessionsSeq: 0, // the latest GET /api/sessions: older answers are dropped
    sessionItems: new Map(), // id → {li, sig}: the list's items as drawn
    renaming: '', // the id of the conversation whose title is being edited
    deleting: '', // the id of the conversation this page is deleting
    speech: localStorage.getItem(SPEECH_KEY) === 'on', // off unless turned on
    speechBuf: '', // voice text not spoken yet: the sentence in progress
    skills: null, // the server's skills [{name, description}], once GET /api/skills said
    skillChoice: loadSkillChoice(), // name → true/false: the picker's ticks
    you: '', // this browser's principal, as GET /api/audit said: its decisions are "you"
    decisions: [], // the session's decisions (approval.DecisionRecord), oldest first
    auditTimer: null,
    auditSeq: 0, // the latest GET /api/audit: older answers are dropped
    allCards: [], // every card of the session drawn, in order (newCard)
    apiLog: '', // what the server's log of model calls keeps (hello's api_log): full, metadata, or '' when off
    logFilter: '', // the conversation the Log panel lists, '' for all of them
    logList: null, // GET /api/apilog's last answer: {mode, calls, more, sessions}
    logSeq: 0, // the latest GET /api/apilog: older answers are dropped
    logOpen: 0, // the id of the call whose detail the panel shows, 0 for none
    logDetailSeq: 0, // the latest GET /api/apilog/call
  };

  // ---- small DOM helpers ----------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // plain returns a name from outside (a conversation's title, a tool's,
  // a server's, a skill's, a file's) without Unicode format characters
  // (bidi overrides and isolates, zero-width ones): invisible, they could
  // make it read as another ("\u202Egnp.exe" shows as "exe.png"). The
  // server drops them from the titles it stores and the names it lists;
  // this also covers the names it passes on (a tool the model calls, a
  // title stored before).
  function plain(name) { return String(name ?? '').replace(/\p{Cf}/gu, ''); }

  function nearBottom() {
    const s = ui.scroll;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 140;
  }

  function toBottom() { ui.scroll.scrollTop = ui.scroll.scrollHeight; }

  function add(node) {
    ui.empty.hidden = true;
    ui.messages.append(node);
    return node;
  }

  // ---- JSON as it was sent ----------------------------------------------
  //
  // What a tool runs with is drawn from the JSON text the server sent, never
  // from what JSON.parse made of it: JSON.parse rounds 12345678901234567890,
  // makes 1e400 Infinity (which JSON.stringify writes null), 2.50 2.5 and -0
  // 0, and keeps one of two members of the same name. The chunks and the
  // history carry a call's arguments as the JSON object itself (SPEC §4),
  // whose text the server writes as the model did; parseKeeping keeps the
  // source text of the members that hold arguments beside JSON.parse's
  // value, and jsonView draws it: numbers as written, every member, and
  // the characters that do not show for what they are (bidi controls,
  // which make a command read as another, zero-width and tag characters,
  // odd spaces) as their escapes, marked.

  // SOURCE keys, in an object parseKeeping returns, the source texts of its
  // members by name: obj[SOURCE].arguments.
  const SOURCE = Symbol('source');

  // HIDDEN_JSON: what jsonView shows as an escape. Format characters (Cf:
  // bidi controls and isolates, zero-width characters, tag characters, the
  // soft hyphen), line and paragraph separators, lone surrogates, private
  // use and unassigned code points, every space but U+0020, and the
  // invisible letters and marks (the combining grapheme joiner, Hangul
  // fillers, variation selectors, the Braille blank).
  const HIDDEN_JSON = /(?! )[\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\p{Zs}\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u2800\u3164\uFE00-\uFE0F\uFFA0\u{E0100}-\u{E01EF}]/gu;

  // HIDDEN_TEXT: what marked shows as its code point in text from outside
  // (a message, a tool's result): format characters, but the joiners that
  // emoji and many scripts need, and the supplementary variation selectors.
  const HIDDEN_TEXT = /(?![\u200C\u200D])[\p{Cf}\u{E0100}-\u{E01EF}]/gu;

  function codePoint(ch) {
    return 'U+' + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
  }

  // mark is the element that shows a hidden character: its escape in JSON,
  // its code point in text.
  function mark(ch, json) {
    const m = el('span', 'cf', json ? [...ch].map(escapeUnit).join('') : '⟨' + codePoint(ch) + '⟩');
    m.title = 'invisible character ' + codePoint(ch);
    return m;
  }

  function escapeUnit(ch) {
    let out = '';
    for (let i = 0; i < ch.length; i++) out += '\\u' + ch.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0');
    return out;
  }

  // appendMarked appends text to node, its hidden characters marked.
  function appendMarked(node, text, re = HIDDEN_TEXT, json = false) {
    text = String(text ?? '');
    if (text.search(re) < 0) { node.append(text); return node; }
    let at = 0;
    for (const m of text.matchAll(re)) {
      if (m.index > at) node.append(text.slice(at, m.index));
      node.append(mark(m[0], json));
      at = m.index + m[0].length;
    }
    if (at < text.length) node.append(text.slice(at));
    return node;
  }

  // shown is el for text from outside (the model's, a tool's): its hidden
  // characters marked.
  function shown(tag, cls, text) { return appendMarked(el(tag, cls), text); }

  // parseKeeping returns JSON.parse(text), and keeps in each object the
  // source text of its members named in names: obj[SOURCE][name].
  function parseKeeping(text, names) {
    const v = JSON.parse(text);
    for (const [path, name, src] of memberSources(text, names)) {
      let o = v;
      for (const k of path) o = o !== null && typeof o === 'object' ? Object.getOwnPropertyDescriptor(o, k)?.value : undefined;
      if (o !== null && typeof o === 'object') (o[SOURCE] ??= {})[name] = src;
    }
    return v;
  }

  // sourceOf returns the source text of obj's member name, as parseKeeping
  // kept it, or undefined.
  function sourceOf(obj, name) {
    return obj && typeof obj === 'object' ? obj[SOURCE]?.[name] : undefined;
  }

  // memberSources lists the members named in names of the JSON text, which
  // JSON.parse read already: [path of the object that holds it, name,
  // source text of its value]. It reads the text once, without recursion.
  function memberSources(text, names) {
    const found = [];
    const path = []; // the keys and indexes down to the value being read
    const open = []; // the containers open: {obj, start of the current member's value}
    const n = text.length;
    let i = 0;
    const space = () => { while (i < n && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++; };
    const member = (f) => { // at a key: read it and the colon
      const s = i;
      i = stringEnd(text, i);
      path.push(JSON.parse(text.slice(s, i)));
      space(); i++; space();
      f.start = i;
    };
    for (;;) {
      space();
      const c = text[i];
      if (c === '{' || c === '[') {
        i++; space();
        if (text[i] !== (c === '{' ? '}' : ']')) {
          const f = { obj: c === '{', start: i };
          open.push(f);
          if (f.obj) member(f); else path.push(0);
          continue;
        }
        i++; // an empty one
      } else if (c === '"') {
        i = stringEnd(text, i);
      } else {
        while (i < n && !',]} \n\r\t'.includes(text[i])) i++;
      }
      // A value ended at i: note it, then go on after it, closing what ends.
      for (;;) {
        const f = open.at(-1);
        if (!f) return found;
        if (f.obj && names.includes(path.at(-1))) found.push([path.slice(0, -1), path.at(-1), text.slice(f.start, i)]);
        space();
        if (text[i] === ',') {
          i++; space();
          if (f.obj) { path.pop(); member(f); } else { path[path.length - 1]++; f.start = i; }
          break;
        }
        i++; // the container's end
        open.pop();
        path.pop();
      }
    }
  }

  // stringEnd returns the index after the JSON string that starts at i in
  // text (at its opening quote).
  function stringEnd(text, i) {
    for (let j = i + 1; ; j++) {
      j = text.indexOf('"', j);
      if (j < 0) throw new SyntaxError('unterminated string');
      let k = j - 1;
      while (text[k] === '\\') k--;
      if ((j - k) % 2 === 1) return j + 1; // an even number of backslashes before it
    }
  }

  // jsonView draws JSON text as it was sent: indented like
  // JSON.stringify(v, null, 2) (on one line when compact), numbers, names
  // and order as written, each string isolated from the bidi order of its
  // neighbours and its hidden characters escaped and marked (HIDDEN_JSON).
  // With expand, a string member of that name that holds a JSON object or
  // array (a tool call's arguments in a request) is drawn as that JSON.
  // Text that is not JSON comes back as it is, its hidden characters
  // marked.
  function jsonView(text, { compact = false, expand = '' } = {}) {
    const out = document.createDocumentFragment();
    try {
      JSON.parse(text); // only JSON is drawn as JSON
      writeJSON(out, text, compact, expand, 0);
    } catch {
      out.replaceChildren();
      appendMarked(out, text, HIDDEN_JSON, true);
    }
    return out;
  }

  function writeJSON(out, text, compact, expand, base) {
    const n = text.length;
    let i = 0;
    let depth = base;
    let key = ''; // the name of the member whose value comes next
    let buf = '';
    const flush = () => { if (buf) { out.append(buf); buf = ''; } };
    const line = () => { if (!compact) buf += '\n' + '  '.repeat(depth); };
    const space = () => { while (i < n && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++; };
    while (true) {
      space();
      if (i >= n) break;
      const c = text[i];
      if (c === '{' || c === '[') {
        i++; space();
        const close = c === '{' ? '}' : ']';
        if (text[i] === close) { i++; buf += c + close; } else { buf += c; depth++; line(); }
        key = '';
        continue;
      }
      if (c === '}' || c === ']') { i++; depth--; line(); buf += c; continue; }
      if (c === ',') { i++; buf += ','; line(); key = ''; continue; }
      if (c === ':') { i++; buf += compact ? ':' : ': '; continue; }
      if (c === '"') {
        const s = i;
        i = stringEnd(text, i);
        const value = JSON.parse(text.slice(s, i));
        space();
        const isKey = text[i] === ':';
        let inner;
        if (!isKey && expand && key === expand && /^\s*[[{]/.test(value)) {
          try { JSON.parse(value); inner = value; } catch { /* drawn as the string it is */ }
        }
        flush();
        if (inner !== undefined) {
          writeJSON(out, inner, compact, '', depth);
        } else {
          const span = el('span', 'json-string');
          appendMarked(span, JSON.stringify(value), HIDDEN_JSON, true);
          out.append(span);
        }
        key = isKey ? value : '';
        continue;
      }
      const s = i; // a number, true, false or null: as written
      while (i < n && !',:]} \n\r\t'.includes(text[i])) i++;
      buf += text.slice(s, i);
    }
    flush();
  }

  // ---- auto-approve list (localStorage) ---------------------------------

  function loadAuto() {
    try {
      const v = JSON.parse(localStorage.getItem(AUTO_KEY) || '[]');
      return new Set(Array.isArray(v) ? v.filter((x) => typeof x === 'string') : []);
    } catch { return new Set(); }
  }

  function saveAuto() {
    localStorage.setItem(AUTO_KEY, JSON.stringify([...st.autoApprove]));
    renderAuto();
  }

  function renderAuto() {
    ui.autoList.replaceChildren();
    for (const name of st.autoApprove) {
      const chip = el('span', 'chip', plain(name));
      const x = el('button', '', '×');
      x.type = 'button';
      x.title = 'stop auto-approving ' + plain(name);
      x.addEventListener('click', () => { st.autoApprove.delete(name); saveAuto(); });
      chip.append(x);
      ui.autoList.append(chip);
    }
    ui.auto.hidden = st.autoApprove.size === 0;
  }

  // ---- MCP servers ----------------------------------------------------------
  //
  // The header's MCP button, shown when the server has MCP servers, opens a
  // panel listing them: state, transport, isolation and tools. The list is
  // read again when the page connects, when a run ends (a server may have
  // gone down or come back) and when the panel opens.

  async function loadMCP() {
    let list;
    try {
      const r = await fetch('/api/mcp/servers');
      if (!r.ok) return;
      list = await r.json();
    } catch {
      return; // the next connect or run tries again
    }
    if (!Array.isArray(list)) return;
    st.mcp = list;
    renderMCP();
  }

  const MCP_STATES = { on_demand: 'starts per conversation' };

  function renderMCP() {
    const list = st.mcp;
    ui.mcp.hidden = list.length === 0;
    if (list.length === 0) ui.mcpPanel.hidden = true;
    const down = list.filter((s) => s.state === 'down').map((s) => plain(s.name));
    ui.mcp.classList.toggle('down', down.length > 0);
    ui.mcp.title = 'MCP servers and their tools' + (down.length ? ' (down: ' + down.join(', ') + ')' : '');
    ui.mcp.setAttribute('aria-expanded', String(!ui.mcpPanel.hidden));
    const box = el('div', 'mcp-list');
    for (const s of list) {
      const item = el('div', 'mcp-server');
      item.dataset.server = s.name;
      item.dataset.state = s.state;
      const head = el('div', 'mcp-head');
      head.append(el('span', 'name', plain(s.name)), el('span', 'mcp-state ' + s.state, MCP_STATES[s.state] || s.state),
        el('span', 'mcp-meta', s.transport + ' · ' + s.isolation));
      item.append(head);
      const tools = el('div', 'mcp-tools');
      for (const name of s.tools || []) tools.append(el('span', 'tool', plain(name)));
      if (!tools.childElementCount) tools.append(el('span', 'mcp-meta', 'no tools'));
      item.append(tools);
      if (s.error) item.append(el('div', 'reason', s.error));
      box.append(item);
    }
    ui.mcpPanel.replaceChildren(box);
    ui.attach.hidden = list.length === 0;
    if (list.length === 0) { ui.resourcePanel.hidden = true; setAttached([]); }
  }

  // ---- MCP resources --------------------------------------------------------
  //
  // The Resources button under the composer, shown when the server has MCP
  // servers, opens a panel listing the resources of those that offer some
  // (GET /api/mcp/resources, for this session: a per_conversation server
  // lists its instance's). A click on one attaches it to the next message
  // (a chip above the composer), a second click or the chip's × detaches
  // it. The server reads them when the message is sent and adds their text
  // to the message the model gets.

  async function loadResources() {
    const seq = ++st.resourcesSeq;
    const id = st.sessionId;
    ui.resourcePanel.replaceChildren(el('div', 'mcp-meta', 'loading…'));
    let list;
    try {
      const r = await fetch('/api/mcp/resources?session_id=' + encodeURIComponent(id));
      list = await r.json();
      if (!r.ok) throw new Error(list.error || 'HTTP ' + r.status);
    } catch (e) {
      if (seq === st.resourcesSeq) ui.resourcePanel.replaceChildren(el('div', 'reason', 'Could not list the resources: ' + e.message));
      return;
    }
    if (seq !== st.resourcesSeq || id !== st.sessionId || !Array.isArray(list)) return;
    renderResources(list);
  }

  function renderResources(list) {
    const box = document.createDocumentFragment();
    for (const s of list) {
      const head = el('div', 'res-server', plain(s.server));
      box.append(head);
      if (s.error) box.append(el('div', 'reason', s.error));
      const row = el('div', 'res-list');
      for (const r of s.resources || []) {
        const b = el('button', 'res ghost', plain(r.title || r.name || r.uri));
        b.type = 'button';
        b.title = r.uri + (r.description ? ' — ' + plain(r.description) : '') + (r.mime_type ? ' (' + r.mime_type + ')' : '');
        b.dataset.server = s.server;
        b.dataset.uri = r.uri;
        b.setAttribute('aria-pressed', String(isAttached(s.server, r.uri)));
        b.addEventListener('click', () => {
          if (isAttached(s.server, r.uri)) detach(s.server, r.uri);
          else setAttached([...st.attachedRes, { server: s.server, uri: r.uri, name: plain(r.title || r.name || r.uri) }]);
        });
        row.append(b);
      }
      if (!row.childElementCount && !s.error) row.append(el('span', 'mcp-meta', 'no resources'));
      box.append(row);
    }
    if (!list.length) box.append(el('div', 'mcp-meta', 'No MCP server offers resources.'));
    ui.resourcePanel.replaceChildren(box);
  }

  function isAttached(server, uri) {
    return st.attachedRes.some((a) => a.server === server && a.uri === uri);
  }

  function detach(server, uri) {
    setAttached(st.attachedRes.filter((a) => !(a.server === server && a.uri === uri)));
  }

  // setAttached sets the resources of the next message and draws their
  // chips (and the panel's pressed buttons).
  function setAttached(list) {
    st.attachedRes = list;
    ui.attached.replaceChildren();
    for (const a of list) {
      const chip = el('span', 'chip', a.name);
      chip.title = a.server + ': ' + a.uri;
      chip.dataset.server = a.server;
      chip.dataset.uri = a.uri;
      const x = el('button', '', '×');
      x.type = 'button';
      x.title = 'detach ' + a.name;
      x.addEventListener('click', () => detach(a.server, a.uri));
      chip.append(x);
      ui.attached.append(chip);
    }
    ui.attached.hidden = list.length === 0;
    for (const b of ui.resourcePanel.querySelectorAll('button.res')) {
      b.setAttribute('aria-pressed', String(isAttached(b.dataset.server, b.dataset.uri)));
    }
  }

  function toggleResources() {
    ui.resourcePanel.hidden = !ui.resourcePanel.hidden;
    ui.attach.setAttribute('aria-expanded', String(!ui.resourcePanel.hidden));
    if (!ui.resourcePanel.hidden) loadResources();
  }

  function toggleMCP() {
    ui.mcpPanel.hidden = !ui.mcpPanel.hidden;
    ui.mcp.setAttribute('aria-expanded', String(!ui.mcpPanel.hidden));
    if (!ui.mcpPanel.hidden) loadMCP();
  }

  // ---- audit ------------------------------------------------------------------
  //
  // GET /api/audit lists the session's decisions (approval.DecisionRecord):
  // the decided cards are labelled with theirs ("Approved by you at
  // 14:02"), and the audit panel lists them all.

  // loadAuditSoon loads the decisions in a moment: the events of a
  // decision come in bursts.
  function loadAuditSoon() {
    clearTimeout(st.auditTimer);
    st.auditTimer = setTimeout(loadAudit, 150);
  }

  async function loadAudit() {
    const id = st.sessionId;
    if (!id) return;
    const seq = ++st.auditSeq;
    let v;
    try {
      const r = await fetch('/api/audit?session_id=' + encodeURIComponent(id));
      if (!r.ok) return;
      v = parseKeeping(await r.text(), ['arguments']);
    } catch {
      return; // the next decision or run tries again
    }
    if (seq !== st.auditSeq || id !== st.sessionId || !v || !Array.isArray(v.decisions)) return;
    st.you = v.you || '';
    st.decisions = v.decisions;
    labelCards();
    renderAudit();
  }

  // labelCards gives each card its decision: by approval id when the card
  // knows it, else (a card drawn from the history) the first decision not
  // taken by another card on a call with its id and tool, in order.
  function labelCards() {
    const byId = new Map(st.decisions.map((d) => [d.approval_id, d]));
    const used = new Set();
    const pending = [];
    for (const k of st.allCards) {
      const d = k.approvalId && byId.get(k.approvalId);
      if (d) { used.add(d); set(k, d); } else pending.push(k);
    }
    for (const k of pending) {
      const d = st.decisions.find((x) => !used.has(x) && x.call_id === k.id && x.tool === k.name);
      if (d) { used.add(d); set(k, d); }
    }
    function set(k, d) {
      if (k.decided === d) return;
      k.decided = d;
      render(k);
    }
  }

  function hhmm(t) {
    const d = new Date(t);
    if (isNaN(d)) return '';
    return String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0');
  }

  // byText names who decided: "you" for this browser's principal.
  function byText(by) {
    return by && by === st.you ? 'you' : plain(by || 'unknown');
  }

  // decidedText says how a decision was taken: "Approved by you at 14:02",
  // "Approved by policy:allow-tools", "Timed out at 14:07".
  function decidedText(rec) {
    const d = rec.decision || {};
    const at = hhmm(rec.decided);
    switch (d.via) {
      case 'timeout': return 'Timed out at ' + at;
      case 'policy': return (d.approved ? 'Approved' : 'Rejected') + ' by ' + byText(d.by);
      case 'system': return 'Cancelled at ' + at + (d.reason ? ' (' + d.reason + ')' : '');
    }
    return (d.approved ? 'Approved' : 'Rejected') + ' by ' + byText(d.by) + ' at ' + at;
  }

  function renderAudit() {
    ui.audit.setAttribute('aria-expanded', String(!ui.auditPanel.hidden));
    if (ui.auditPanel.hidden) return;
    const list = st.decisions;
    if (list.length === 0) {
      ui.auditPanel.replaceChildren(el('div', 'audit-empty', 'No decisions in this conversation yet.'));
      return;
    }
    const table = el('table', 'audit');
    const head = el('tr');
    for (const h of ['time', 'tool', 'decision', 'by', 'via', 'reason', 'edit']) head.append(el('th', '', h));
    const thead = el('thead');
    thead.append(head);
    const tb = el('tbody');
    for (const rec of list) {
      const d = rec.decision || {};
      const tr = el('tr', 'audit-entry');
      tr.dataset.approvalId = rec.approval_id;
      const decision = d.via === 'timeout' ? 'timed out' : d.approved ? 'approved' : 'rejected';
      const edit = el('td', 'edit');
      if (d.arguments !== undefined && d.arguments !== null) edit.append(jsonView(sourceOf(d, 'arguments') ?? JSON.stringify(d.arguments), { compact: true }));
      tr.append(el('td', 'time', hhmm(rec.decided)), el('td', 'tool', plain(rec.tool)), el('td', 'decision', decision),
        el('td', 'by', byText(d.by)), el('td', 'via', d.via || ''), el('td', 'reason', d.reason || ''), edit);
      tb.append(tr);
    }
    table.append(thead, tb);
    ui.auditPanel.replaceChildren(table);
  }

  function toggleAudit() {
    ui.auditPanel.hidden = !ui.auditPanel.hidden;
    renderAudit();
    if (!ui.auditPanel.hidden) loadAudit();
  }

  // ---- the log of model calls ------------------------------------------------
  //
  // The header's Log button, shown when the server keeps a log of the model
  // calls (hello's api_log), opens a panel listing the calls of this
  // browser's conversations (GET /api/apilog), newest first: time,
  // conversation, purpose, model, tokens, time to the first token and
  // latency, status; a failed call is marked, with its error. A click on a
  // call shows its request and reply (GET /api/apilog/call), pretty-printed.
  // A select filters by conversation, Delete deletes the calls listed (all
  // of this browser's, or the conversation's). The list is read again when
  // the panel opens and when a run ends. Record data goes into the page as
  // text only.

  async function loadLog() {
    if (!st.apiLog || ui.logPanel.hidden) return;
    const seq = ++st.logSeq;
    const filter = st.logFilter;
    let v;
    try {
      const r = await fetch('/api/apilog' + (filter ? '?session_id=' + encodeURIComponent(filter) : ''));
      v = await r.json();
      if (!r.ok) throw new Error(v.error || 'HTTP ' + r.status);
    } catch (e) {
      if (seq === st.logSeq) logStatus('Could not read the log: ' + e.message, true);
      return;
    }
    if (seq !== st.logSeq || filter !== st.logFilter || !v || !Array.isArray(v.calls)) return;
    st.logList = v;
    renderLog();
  }

  function logStatus(text, bad) {
    const s = ui.logPanel.querySelector('.log-status');
    if (!s) return;
    s.textContent = text;
    s.classList.toggle('bad', !!bad);
  }

  // millis shows a duration in nanoseconds (Go's time.Duration in JSON).
  function millis(ns) {
    const ms = Number(ns) / 1e6;
    if (!(ms > 0)) return '—';
    return ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(2) + ' s';
  }

  function hhmmss(t) {
    const d = new Date(t);
    if (isNaN(d)) return '';
    return hhmm(t) + ':' + String(d.getSeconds()).padStart(2, '0');
  }

  // logSessionName names a conversation of the log: its title, else its id.
  function logSessionName(id, byId) {
    const t = plain(byId.get(id) || '');
    return t || (id ? id.slice(id.indexOf('-') + 1) : '(none)');
  }

  // logFrame draws the panel's bar (filter, Refresh, Delete), table and
  // detail once; renderLog fills them.
  function logFrame() {
    let frame = ui.logPanel.querySelector('.log-frame');
    if (frame) return frame;
    frame = el('div', 'log-frame');
    const bar = el('div', 'log-bar');
    const label = el('label', '', 'Conversation ');
    const sel = el('select', 'log-session');
    sel.id = 'log-session';
    sel.addEventListener('change', () => {
      st.logFilter = sel.value;
      st.logOpen = 0;
      loadLog();
    });
    label.append(sel);
    const refresh = el('button', 'ghost small log-refresh', 'Refresh');
    refresh.type = 'button';
    refresh.addEventListener('click', loadLog);
    const del = el('button', 'ghost small log-delete', 'Delete');
    del.type = 'button';
    del.title = 'delete the calls listed';
    del.addEventListener('click', () => deleteLog(del));
    bar.append(label, refresh, del, el('span', 'log-status'));
    const table = el('table', 'apilog');
    const head = el('tr');
    for (const h of ['time', 'conversation', 'purpose', 'model', 'tokens in / out', 'first token', 'latency', 'status']) head.append(el('th', '', h));
    const thead = el('thead');
    thead.append(head);
    table.append(thead, el('tbody'));
    const detail = el('div', 'log-detail');
    detail.hidden = true;
    frame.append(bar, table, el('div', 'log-empty'), detail);
    ui.logPanel.replaceChildren(frame);
    return frame;
  }

  function renderLog() {
    ui.apilog.setAttribute('aria-expanded', String(!ui.logPanel.hidden));
    if (ui.logPanel.hidden) return;
    const frame = logFrame();
    const v = st.logList || { calls: [], sessions: [] };
    const byId = new Map((v.sessions || []).map((s) => [s.id, s.title || '']));
    const sel = frame.querySelector('select.log-session');
    const opts = [el('option', '', 'All conversations')];
    opts[0].value = '';
    for (const s of v.sessions || []) {
      const o = el('option', '', logSessionName(s.id, byId));
      o.value = s.id;
      opts.push(o);
    }
    if (st.logFilter && !byId.has(st.logFilter)) {
      const o = el('option', '', logSessionName(st.logFilter, byId));
      o.value = st.logFilter;
      opts.push(o);
    }
    sel.replaceChildren(...opts);
    sel.value = st.logFilter;
    const tb = frame.querySelector('table.apilog tbody');
    const rows = [];
    for (const c of v.calls) {
      const tr = el('tr', 'log-entry' + (c.status === 'error' ? ' error' : ''));
      tr.dataset.id = String(c.id);
      tr.dataset.purpose = c.purpose;
      tr.dataset.status = c.status;
      tr.tabIndex = 0;
      tr.title = 'show the request and the reply';
      if (c.id === st.logOpen) tr.classList.add('open');
      const usage = c.usage || {};
      const status = el('td', 'status', c.status);
      if (c.error) status.append(el('div', 'log-error', c.error));
      tr.append(el('td', 'time', hhmmss(c.started)), el('td', 'conv', logSessionName(c.session_id, byId)),
        el('td', 'purpose', c.purpose), el('td', 'model', plain(c.model)),
        el('td', 'tokens', (usage.input_tokens || 0) + ' / ' + (usage.output_tokens || 0)),
        el('td', 'first', millis(c.first_token)), el('td', 'latency', millis(c.latency)), status);
      tr.addEventListener('click', () => openCall(c.id));
      tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') openCall(c.id); });
      rows.push(tr);
    }
    tb.replaceChildren(...rows);
    frame.querySelector('.log-empty').textContent = v.calls.length ? (v.more ? 'Older calls are not listed.' : '')
      : 'No model calls logged' + (st.logFilter ? ' in this conversation.' : ' yet.');
    frame.querySelector('button.log-delete').disabled = v.calls.length === 0;
    logStatus(v.mode === 'metadata' ? 'metadata only: requests and replies are not kept' : '');
    if (st.logOpen && !v.calls.some((c) => c.id === st.logOpen)) closeCall();
  }

  function closeCall() {
    st.logOpen = 0;
    st.logDetailSeq++;
    const d = ui.logPanel.querySelector('.log-detail');
    if (d) { d.hidden = true; d.replaceChildren(); }
    for (const tr of ui.logPanel.querySelectorAll('tr.log-entry.open')) tr.classList.remove('open');
  }

  // openCall shows a call's request and reply under the list; a second
  // click on the same call closes it.
  async function openCall(id) {
    if (st.logOpen === id) { closeCall(); return; }
    closeCall();
    st.logOpen = id;
    for (const tr of ui.logPanel.querySelectorAll('tr.log-entry')) tr.classList.toggle('open', tr.dataset.id === String(id));
    const d = ui.logPanel.querySelector('.log-detail');
    d.hidden = false;
    d.replaceChildren(el('div', 'mcp-meta', 'loading…'));
    const seq = ++st.logDetailSeq;
    let c;
    try {
      const r = await fetch('/api/apilog/call?id=' + encodeURIComponent(id));
      c = parseKeeping(await r.text(), ['request', 'reply']);
      if (!r.ok) throw new Error(c.error || 'HTTP ' + r.status);
    } catch (e) {
      if (seq === st.logDetailSeq) d.replaceChildren(el('div', 'reason', 'Could not read the call: ' + e.message));
      return;
    }
    if (seq !== st.logDetailSeq) return;
    renderCall(d, c);
  }

  // logJSON draws a call's request or reply as the server sent it (see
  // jsonView); the arguments of the reply's tool calls, a string of JSON
  // text, as the JSON they hold. The request is drawn as it was sent.
  function logJSON(cls, c, name, expand) {
    const pre = el('pre', cls);
    if (c[name] === undefined || c[name] === null) pre.textContent = 'not kept (the log keeps metadata only)';
    else pre.append(jsonView(sourceOf(c, name) ?? JSON.stringify(c[name]), { expand }));
    return pre;
  }

  function renderCall(d, c) {
    const head = el('div', 'log-detail-head');
    const bits = ['#' + c.id, c.purpose, plain(c.model), 'round ' + c.round];
    if (c.finish_reason) bits.push('finish: ' + c.finish_reason);
    head.append(el('span', '', bits.join(' · ')));
    const close = el('button', 'ghost small', 'Close');
    close.type = 'button';
    close.addEventListener('click', closeCall);
    head.append(close);
    const parts = [head];
    if (c.error) parts.push(el('div', 'log-error', c.error));
    parts.push(el('div', 'label', 'request'));
    parts.push(logJSON('log-request', c, 'request', ''));
    parts.push(el('div', 'label', 'reply'));
    parts.push(logJSON('log-reply', c, 'reply', 'arguments'));
    d.replaceChildren(...parts);
  }

  // deleteLog deletes the calls listed on a second click: the first arms
  // the button.
  async function deleteLog(b) {
    if (!b.classList.contains('armed')) {
      b.classList.add('armed');
      b.textContent = 'Delete?';
      b.title = 'click again to delete ' + (st.logFilter ? "this conversation's calls" : 'the calls of all your conversations');
      clearTimeout(b.disarmTimer);
      b.disarmTimer = setTimeout(() => disarmLog(b), 4000);
      return;
    }
    disarmLog(b);
    let res;
    try {
      res = await post('/api/apilog/delete', st.logFilter ? { session_id: st.logFilter } : {});
    } catch (e) {
      res = { ok: false, data: { error: e.message } };
    }
    if (!res.ok) {
      logStatus('Could not delete: ' + (res.data.error || 'HTTP ' + res.status), true);
      return;
    }
    closeCall();
    await loadLog();
    logStatus('Deleted.');
  }

  function disarmLog(b) {
    clearTimeout(b.disarmTimer);
    b.classList.remove('armed');
    b.textContent = 'Delete';
    b.title = 'delete the calls listed';
  }

  function toggleLog() {
    ui.logPanel.hidden = !ui.logPanel.hidden;
    renderLog();
    loadLog();
  }

  // setAPILog shows the Log button when the server keeps a log (hello).
  function setAPILog(mode) {
    st.apiLog = mode || '';
    ui.apilog.hidden = !st.apiLog;
    if (!st.apiLog) ui.logPanel.hidden = true;
    ui.apilog.setAttribute('aria-expanded', String(!ui.logPanel.hidden));
  }

  // ---- messages -----------------------------------------------------------

  // addUser shows a user message; images, from the history, are
  // descriptions shown as placeholders.
  function addUser(text, images) {
    const m = add(shown('div', 'msg user', text));
    for (const desc of images || []) m.append(el('div', 'attachment', '[image: ' + desc + ']'));
  }

  // system shows one of the page's system messages. kind is interrupted,
  // rejected, timeout, error, warning or info.
  function system(kind, text) {
    const stick = nearBottom();
    const m = add(el('div', 'sys ' + kind, text));
    m.dataset.kind = kind;
    if (stick) toBottom();
    return m;
  }

  // waitingNote says that a turn waits for a decision on its cards. It
  // holds only while the turn waits: dropWaitingNotes removes it when the
  // turn resumes or a run ends, however it was decided (this tab, another
  // tab or replica, the sweeper).
  function waitingNote(text) {
    system('info', text).classList.add('waiting-note');
  }

  function dropWaitingNotes() {
    for (const m of ui.messages.querySelectorAll('.sys.waiting-note')) m.remove();
  }

  function liveTurn() {
    if (!st.turn) {
      st.turn = add(el('div', 'turn live'));
      st.top = { body: st.turn, textEl: null, reasonEl: null };
    }
    return st.turn;
  }

  function dropThinking() {
    if (st.turn) st.turn.querySelector(':scope > .thinking')?.remove();
  }

  // scopeOf returns where a chunk's text, reasoning and cards go: the live
  // turn, or for a chunk of a sub-agent's run (depth > 0) the nested block
  // under the card of the call that started it.
  function scopeOf(c) {
    if (c.depth > 0) return nestedScope(c);
    liveTurn();
    return st.top;
  }

  function onText(c) {
    if (!c.text) return; // a piece holding only control tags
    const s = scopeOf(c);
    if (!s.textEl || s.body.lastElementChild !== s.textEl || s.textEl.dataset.round !== String(c.round)) {
      s.textEl = el('div', 'text');
      s.textEl.dataset.round = String(c.round);
      if (c.voice) s.textEl.classList.add('voice');
      s.body.append(s.textEl);
    }
    appendMarked(s.textEl, c.text); // text nodes: never HTML
    // A sub-agent writes for the model that called it, not for the user.
    if (c.voice && !c.depth) speak(c.text);
  }

  function onReasoning(c) {
    if (!c.text) return;
    const s = scopeOf(c);
    if (!s.reasonEl || s.body.lastElementChild !== s.reasonEl || s.reasonEl.dataset.round !== String(c.round)) {
      s.reasonEl = el('details', 'reasoning');
      s.reasonEl.dataset.round = String(c.round);
      s.reasonEl.append(el('summary', '', 'reasoning'), el('div'));
      s.body.append(s.reasonEl);
    }
    s.reasonEl.lastElementChild.append(c.text);
  }

  function onRoundEnd(c) {
    const parts = ['round ' + c.round];
    if (c.intent) parts.push(c.intent);
    if (c.usage) parts.push(c.usage.prompt_tokens + ' → ' + c.usage.completion_tokens + ' tokens');
    const s = scopeOf(c);
    s.body.append(el('div', 'round-meta', parts.join(' · ')));
    s.textEl = s.reasonEl = null;
    if (!c.depth) flushSpeech();
  }

  function onWarning(c) {
    if (!c.depth) { system('warning', c.text || 'warning'); return; }
    const w = el('div', 'sys warning', c.text || 'warning');
    w.dataset.kind = 'warning';
    scopeOf(c).body.append(w);
  }

  // ---- tool cards -----------------------------------------------------------
  //
  // A card per call, keyed by call id (never by tool name), through the
  // states preparing → approval → executing → done, or rejected /
  // invalidated; a call drawn from a history that does not say how it
  // ended (stored before outcomes were kept) is unknown, never done.

  const FINAL = new Set(['done', 'rejected', 'invalidated', 'unknown']);

  // A card's key is its call id; the card of a call made in a sub-agent's
  // run is keyed by the chunk's parent (the key of the card it is nested
  // under), "/", and its call id, which stays unique when runs reuse ids.
  function cardKey(c) {
    return c.depth > 0 ? c.parent + '/' + c.tool.id : c.tool.id;
  }

  function newCard(holder, key, id, name) {
    const k = {
      key, id, name, state: 'preparing', output: '',
      args: undefined, // the arguments, as JSON.parse read them
      argsSource: undefined, // their JSON text, as sent (see jsonView)
      argsRaw: '', // arguments that are not JSON, as written
      result: undefined, reason: '', approvalId: '', digest: '', busy: false, auto: false,
      hints: null, // what the tool says about itself (agent.ToolHints), once a chunk carries it
      mustAsk: false, details: [], // a call a person must decide on, and what they decide on
      decided: null, // its decision from the audit (approval.DecisionRecord), once known
      el: el('div', 'card'), outEl: null,
      sides: [], // the elements of the call's side messages, drawn in the card
      forms: [], // its forms (ask_user_question)
      nested: null, // the scope of the sub-agent run it started, if any
    };
    k.el.dataset.callId = id;
    k.el.dataset.key = key;
    k.el.dataset.tool = name;
    holder.append(k.el);
    st.allCards.push(k);
    render(k);
    return k;
  }

  function cardFor(c) {
    const tool = c.tool;
    const key = cardKey(c);
    let k = st.cards.get(key);
    if (!k) {
      k = newCard(scopeOf(c).body, key, tool.id, tool.name);
      st.cards.set(key, k);
    }
    if (tool.arguments !== undefined) setArgs(k, tool);
    else if (tool.arguments_raw) k.argsRaw = tool.arguments_raw;
    return k;
  }

  // parentCard returns the card a sub-agent's chunk is nested under. A page
  // that reconnected during the run may not have it: it is drawn then, as
  // a running call of the sub-agent (and so are the cards above it).
  function parentCard(c) {
    let k = st.cards.get(c.parent);
    if (k) return k;
    const names = String(c.agent || '').split('/');
    const ids = String(c.parent || '').split('/');
    const up = { depth: c.depth - 1, agent: names.slice(0, -1).join('/'), parent: ids.slice(0, -1).join('/') };
    const holder = up.depth > 0 && up.parent ? nestedScope(up).body : liveTurn();
    k = newCard(holder, c.parent, ids.at(-1), names.at(-1) || 'sub-agent');
    st.cards.set(c.parent, k);
    setState(k, 'executing');
    return k;
  }

  // nestedScope returns the block under a sub-agent call's card where the
  // chunks of its run go: a <details>, open until the user closes it.
  function nestedScope(c) {
    const k = parentCard(c);
    if (!k.nested) {
      const d = el('details', 'subagent');
      d.open = true;
      d.dataset.agent = c.agent || '';
      const name = String(c.agent || '').split('/').at(-1) || 'sub-agent';
      const body = el('div', 'subagent-body');
      d.append(el('summary', '', name + ' · its run'), body);
      k.nested = { el: d, body, textEl: null, reasonEl: null };
      render(k);
    }
    return k.nested;
  }

  function hasArgs(k) { return k.args !== undefined || k.argsRaw !== ''; }

  // argsView draws a card's arguments from the text they came in (see
  // jsonView); arguments that are not JSON (arguments_raw) as written.
  function argsView(k) {
    if (k.args === undefined) return jsonView(k.argsRaw);
    return jsonView(k.argsSource ?? JSON.stringify(k.args));
  }

  // setArgs sets a card's arguments: the value and the JSON text it was
  // parsed from (holder[SOURCE], see parseKeeping).
  function setArgs(k, holder) {
    k.args = holder.arguments;
    k.argsSource = sourceOf(holder, 'arguments');
  }

  function setState(k, state) {
    k.state = state;
    if (FINAL.has(state)) closeForms(k);
    render(k);
  }

  // block draws a labelled block of a card: content is an element (a
  // call's arguments, see argsView) or text from outside (a result, an
  // output), whose hidden characters are marked.
  function block(label, content) {
    const d = el('div');
    const pre = el('pre');
    if (content instanceof Node) pre.append(content);
    else appendMarked(pre, content);
    d.append(el('div', 'label', label), pre);
    return d;
  }

  // hintBadges draws what a tool says about itself (agent.ToolHints), in
  // the words of approval.HintLabels; hints the host does not trust are
  // marked so.
  function hintBadges(h) {
    const row = el('div', 'hints');
    const badge = (cls, text) => row.append(el('span', 'hint ' + cls, text));
    if (h.read_only) badge('read-only', 'read-only');
    if (h.destructive) badge('destructive', 'destructive');
    if (h.idempotent) badge('idempotent', 'idempotent');
    badge(h.open_world ? 'open-world' : 'closed-world', h.open_world ? 'open world' : 'closed world');
    if (!h.trusted) badge('untrusted', 'untrusted hints');
    return row;
  }

  function statusText(k) {
    switch (k.state) {
      case 'preparing': return 'preparing…';
      case 'approval': return k.busy ? 'sending decision…' : 'needs approval';
      case 'executing': return k.auto ? 'auto-approved · executing…' : 'executing…';
      case 'done': return 'done';
      case 'rejected': return 'rejected';
      case 'invalidated': return 'invalidated';
      case 'unknown': return 'ended · outcome not recorded';
    }
    return k.state;
  }

  function render(k) {
    k.el.className = 'card ' + k.state;
    k.el.dataset.state = k.state;
    const head = el('div', 'card-head');
    const icon = el('span', 'icon');
    if (k.state === 'preparing' || k.state === 'executing') icon.append(el('span', 'spinner'));
    else icon.textContent = { approval: '?', done: '✓', rejected: '✕', invalidated: '⊘', unknown: '–' }[k.state] || '';
    head.append(icon, el('span', 'name', plain(k.name)), el('span', 'status', statusText(k)));
    if (k.decided && k.state !== 'approval') {
      // In the head's line: the label that comes with the audit moves
      // nothing on the page.
      const d = el('span', 'decided', decidedText(k.decided));
      d.dataset.via = k.decided.decision?.via || '';
      head.append(d);
    }
    const body = el('div', 'card-body');
    k.outEl = null;

    switch (k.state) {
      case 'approval': {
        if (k.hints) body.append(hintBadges(k.hints));
        if (k.details.length > 0) {
          const d = el('div', 'details');
          for (const line of k.details) d.append(el('div', 'detail', plain(line)));
          body.append(d);
        }
        body.append(block('arguments', argsView(k)));
        const actions = el('div', 'actions');
        const yes = el('button', 'primary approve', 'Approve');
        const no = el('button', 'reject', 'Reject');
        yes.type = no.type = 'button';
        yes.disabled = no.disabled = k.busy || !k.approvalId || st.offline;
        const label = el('label');
        const box = el('input', 'auto-approve');
        box.type = 'checkbox';
        box.checked = st.autoApprove.has(k.name);
        label.append(box, 'auto-approve this tool');
        yes.addEventListener('click', () => {
          if (box.checked) { st.autoApprove.add(k.name); saveAuto(); }
          decide(k, true);
        });
        no.addEventListener('click', () => decide(k, false));
        // A changed definition is for a person to approve, every time: no
        // auto-approve box.
        if (k.mustAsk) actions.append(yes, no);
        else actions.append(yes, no, label);
        body.append(actions);
        if (st.offline) body.append(el('div', 'offline-note', OFFLINE_NOTE));
        break;
      }
      case 'executing':
        // A form or a card shows what the arguments say.
        if (hasArgs(k) && k.sides.length === 0) body.append(block('arguments', argsView(k)));
        if (k.output !== '') {
          const b = block('output', k.output);
          k.outEl = b.lastElementChild;
          body.append(b);
        }
        break;
      case 'done': {
        // From the history, where no side message is kept: what the call
        // showed, drawn again from its arguments and result.
        const failed = String(k.result ?? '').startsWith('error');
        if (k.sides.length === 0 && !failed && k.args && typeof k.args === 'object') {
          if (k.name === 'show_card') body.append(renderDisplayCard(k.args));
          if (k.name === 'ask_user_question') {
            const a = renderAnswers(k.result);
            if (a) body.append(a);
          }
        }
        const d = el('details');
        d.append(el('summary', '', 'arguments and result'));
        d.append(block('arguments', argsView(k)), block('result', k.result ?? ''));
        body.append(d);
        break;
      }
      case 'unknown': {
        // An old history: what the tool message says, without a verdict.
        const d = el('details');
        d.append(el('summary', '', 'arguments and stored message'));
        d.append(block('arguments', argsView(k)), block('tool message', k.result ?? ''));
        body.append(d);
        break;
      }
      case 'rejected':
      case 'invalidated':
        if (k.reason) body.append(shown('div', 'reason', k.reason));
        if (hasArgs(k)) {
          const d = el('details');
          d.append(el('summary', '', k.output ? 'arguments and partial output' : 'arguments'));
          // The output was on screen while the call ran: keep it there.
          d.open = k.output !== '';
          d.append(block('arguments', argsView(k)));
          if (k.output) d.append(block('partial output', k.output));
          body.append(d);
        }
        break;
    }
    // What the call showed first, then its details, then the run of the
    // sub-agent it started.
    k.el.replaceChildren(head, ...k.sides);
    if (body.childElementCount > 0) k.el.append(body);
    if (k.nested) k.el.append(k.nested.el);
  }

  function appendOutput(k, text) {
    k.output += text;
    if (k.state !== 'executing') return;
    if (!k.outEl) { render(k); return; }
    const stick = k.outEl.scrollHeight - k.outEl.scrollTop - k.outEl.clientHeight < 20;
    appendMarked(k.outEl, text);
    if (stick) k.outEl.scrollTop = k.outEl.scrollHeight;
  }

  function onToolCall(c) {
    const t = c.tool;
    if (!t || !t.id) return;
    const k = cardFor(c);
    if (FINAL.has(k.state)) return;
    if (t.hints && typeof t.hints === 'object') k.hints = t.hints;
    switch (t.state) {
      case 'start':
        break;
      case 'approval_required':
        if (k.state !== 'preparing' && k.state !== 'approval') return; // a redraw of an answered approval
        k.approvalId = t.approval_id || '';
        k.digest = t.arguments_digest || '';
        k.mustAsk = t.must_ask === true;
        k.details = Array.isArray(t.details) ? t.details.map(String) : [];
        if (k.approvalId && st.autoApprove.has(k.name) && !k.mustAsk) {
          // Auto-approve: answered at once, the card never waits.
          k.auto = true;
          setState(k, 'executing');
          decide(k, true);
        } else {
          setState(k, 'approval');
        }
        break;
      case 'executing':
        if (k.state === 'approval' || k.auto) loadAuditSoon(); // decided (here, in another tab, by a policy)
        if (k.state !== 'executing') setState(k, 'executing');
        if (t.partial_result) appendOutput(k, t.partial_result);
        break;
      case 'result':
        k.result = t.result ?? '';
        setState(k, 'done');
        break;
    }
  }

  function onToolRejected(c) {
    const t = c.tool;
    if (!t || !t.id) return;
    const k = cardFor(c);
    if (FINAL.has(k.state)) return;
    k.reason = t.reason || '';
    if (t.partial_result) k.output += (k.output.endsWith(t.partial_result) ? '' : t.partial_result);
    loadAuditSoon();
    // A call stopped by an interrupt, or never begun because the run ended
    // first, is invalidated, not rejected: nobody said no to it.
    if (st.interrupting || STOPPED.has(t.cause)) {
      setState(k, 'invalidated');
    } else {
      setState(k, 'rejected');
    }
  }

  // The causes (agent.Cause) of calls that were stopped, not rejected.
  const STOPPED = new Set(['approval_interrupted', 'interrupted', 'not_run', 'incomplete', 'stopped', 'moved_on']);

  // invalidateStopped turns the cards of a run that was stopped (by the
  // user or the server), not rejected, from rejected into invalidated.
  function invalidateStopped() {
    for (const k of st.cards.values()) {
      if (k.state === 'rejected') setState(k, 'invalidated');
    }
  }

  // Side messages (a tool's side chunk, {type, ...}) are drawn by the
  // renderer of their type, in their call's card; a type without one
  // shows as JSON. A renderer returns the element, or null to draw nothing
  // (a form drawn already, sent again to a reconnecting page).
  const SIDE_RENDERERS = new Map([
    ['form_request', renderForm],
    ['elicitation_request', renderElicitation],
    ['card', renderDisplayCard],
    ['connect_request', renderConnect],
  ]);

  // renderConnect draws an MCP server's request that the person connect
  // (authorize) it: a "Connect <server>" link to the authorization URL, in
  // a new tab, with the host it leads to. The waiting call goes on once
  // the authorization server sent the person back to /oauth/callback.
  function renderConnect(side, c) {
    let u;
    try { u = new URL(String(side.url || '')); } catch (e) { return renderSideJSON(side, c); }
    if (u.protocol !== 'https:' && u.protocol !== 'http:') return renderSideJSON(side, c);
    const box = el('div', 'side connect');
    const a = el('a', 'connect-button', 'Connect ' + plain(String(side.server || 'server')));
    a.href = u.href;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    box.append(el('div', 'label', 'this server needs your authorization'), a,
      el('div', 'connect-host', 'opens ' + u.host));
    return box;
  }

  // renderSideJSON draws a side message as the JSON it came in (c is its
  // chunk).
  function renderSideJSON(side, c) {
    const box = el('div', 'side');
    const pre = el('pre');
    pre.append(jsonView(sourceOf(c, 'side') ?? JSON.stringify(side)));
    box.append(el('div', 'label', 'side message' + (side.type ? ': ' + side.type : '')), pre);
    return box;
  }

  function onSide(c) {
    const k = c.tool && c.tool.id ? st.cards.get(cardKey(c)) : undefined;
    const side = c.side && typeof c.side === 'object' ? c.side : {};
    const box = (SIDE_RENDERERS.get(side.type) || renderSideJSON)(side, c, k);
    if (!box) return;
    if (k) {
      k.sides.push(box);
      render(k);
    } else {
      scopeOf(c).body.append(box);
    }
  }

  // ---- cards (show_card) ------------------------------------------------------
  //
  // Title, body and fields are text. An image is shown only from a data:
  // URL of a raster image, at once, or from an http(s) URL once the user
  // asks for it: loading it would tell its server that the card was shown
  // (and whatever its URL says), which a model led astray could use.

  const DATA_IMAGE = /^data:image\/(png|jpeg|gif|webp|avif|bmp);/i;

  function imageURL(u) {
    if (typeof u !== 'string' || u === '') return null;
    if (DATA_IMAGE.test(u)) return { url: u, remote: false };
    try {
      const url = new URL(u);
      if (url.protocol === 'https:' || url.protocol === 'http:') return { url: url.href, remote: true, host: url.host };
    } catch { /* not a URL */ }
    return null;
  }

  function cardImage(src, alt) {
    const img = el('img', 'card-image');
    img.alt = alt;
    img.referrerPolicy = 'no-referrer';
    img.src = src;
    return img;
  }

  function renderDisplayCard(card) {
    const dc = el('div', 'display-card');
    dc.append(shown('div', 'title', card.title ?? ''));
    if (card.body) dc.append(shown('div', 'body', card.body));
    const img = imageURL(card.image_url);
    if (img && !img.remote) {
      dc.append(cardImage(img.url, card.title ?? ''));
    } else if (img) {
      const b = el('button', 'small load-image', 'Show image from ' + img.host);
      b.type = 'button';
      b.title = img.url;
      b.addEventListener('click', () => b.replaceWith(cardImage(img.url, card.title ?? '')));
      dc.append(b);
    }
    if (Array.isArray(card.fields) && card.fields.length) {
      const table = el('table', 'fields');
      const tb = el('tbody');
      for (const f of card.fields) {
        const tr = el('tr');
        tr.append(shown('th', '', f?.name ?? ''), shown('td', '', f?.value ?? ''));
        tb.append(tr);
      }
      table.append(tb);
      dc.append(table);
    }
    return dc;
  }

  // ---- forms (ask_user_question) ----------------------------------------------
  //
  // A form is drawn in its call's card: a text box, radio buttons or check
  // boxes per question. It is sent once; it is disabled once answered, or
  // when its call ends without the answers (timed out, interrupted, the run
  // ended). An answer the server refuses (400: a question not answered, ...)
  // shows why, and the form stays open.

  function renderForm(side, c, k) {
    if (!side.form_id || st.forms.has(side.form_id)) return null;
    const f = { id: side.form_id, state: 'open', questions: [], el: el('form', 'ask-form') };
    f.el.dataset.formId = side.form_id;
    if (side.title) f.el.append(shown('div', 'form-title', side.title));
    const questions = Array.isArray(side.questions) ? side.questions : [];
    questions.forEach((q, i) => {
      const fs = el('fieldset', 'question');
      fs.dataset.id = q.id;
      fs.dataset.kind = q.kind;
      fs.append(shown('legend', '', q.question ?? ''));
      const name = 'form-' + side.form_id + '-' + i;
      let value;
      if (q.kind === 'single' || q.kind === 'multiple') {
        const opts = el('div', 'options');
        for (const o of Array.isArray(q.options) ? q.options : []) {
          const label = el('label', 'option');
          const inp = el('input');
          inp.type = q.kind === 'single' ? 'radio' : 'checkbox';
          inp.name = name;
          inp.value = o;
          label.append(inp, shown('span', '', o));
          opts.append(label);
        }
        fs.append(opts);
        value = () => {
          const chosen = [...opts.querySelectorAll('input:checked')].map((x) => x.value);
          return q.kind === 'single' ? chosen[0] : chosen; // none chosen: no answer, the server says so
        };
      } else {
        const ta = el('textarea', 'answer');
        ta.name = name;
        ta.rows = 2;
        ta.setAttribute('aria-label', q.question ?? '');
        ta.addEventListener('keydown', (e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); answerForm(f); }
        });
        fs.append(ta);
        value = () => ta.value;
      }
      f.questions.push({ id: q.id, value });
      f.el.append(fs);
    });
    f.error = el('div', 'form-error');
    f.error.setAttribute('role', 'alert');
    f.error.hidden = true;
    f.submit = el('button', 'primary', 'Send answers');
    f.submit.type = 'submit';
    f.note = el('span', 'form-note');
    const actions = el('div', 'actions');
    actions.append(f.submit, f.note);
    f.el.append(f.error, actions);
    f.el.addEventListener('submit', (e) => { e.preventDefault(); answerForm(f); });
    st.forms.set(f.id, f);
    if (k) k.forms.push(f);
    setFormState(f, 'open', '');
    return f.el;
  }

  // setFormState: open (answerable), sending, answered or closed.
  // An open form whose page is offline keeps what was typed, editable, but
  // cannot be sent.
  function setFormState(f, state, note) {
    f.state = state;
    f.el.dataset.state = state;
    const offline = state === 'open' && st.offline;
    f.el.classList.toggle('offline', offline);
    for (const fs of f.el.querySelectorAll('fieldset')) fs.disabled = state !== 'open';
    for (const b of [f.submit, ...(f.buttons || [])]) {
      b.disabled = state !== 'open' || offline || (b === f.submit && f.needsConsent && !f.consented());
      b.hidden = state === 'answered' || state === 'closed';
    }
    f.note.textContent = offline && !note ? OFFLINE_NOTE : note;
  }

  // An MCP server's request for input (an elicitation_request side): in
  // form mode its fields (from the requested schema), answered Accept with
  // their content, Decline or Cancel; in URL mode the host the link goes
  // to, and an Open that is enabled only once the user consents, which
  // opens the link and accepts. The server's name is always shown: the
  // request is the server's, not the assistant's. Answered through the
  // same endpoint as a question form, with an action.
  function renderElicitation(side, c, k) {
    if (!side.form_id || st.forms.has(side.form_id)) return null;
    const f = { id: side.form_id, state: 'open', questions: [], el: el('form', 'ask-form elicitation'), buttons: [] };
    f.el.dataset.formId = side.form_id;
    f.el.dataset.mode = side.mode || 'form';
    f.el.append(el('div', 'form-title', 'The server ' + (side.server || '?') + ' asks'));
    f.el.append(el('div', 'elicit-message', side.message || ''));
    f.error = el('div', 'form-error');
    f.error.setAttribute('role', 'alert');
    f.error.hidden = true;
    f.note = el('span', 'form-note');
    const actions = el('div', 'actions');
    if (side.mode === 'url') {
      const fs = el('fieldset', 'question');
      fs.append(el('div', 'elicit-host', 'Link to ' + (side.host || '?')));
      fs.append(el('div', 'elicit-url', side.url || ''));
      const label = el('label', 'option');
      const consent = el('input');
      consent.type = 'checkbox';
      consent.className = 'elicit-consent';
      label.append(consent, el('span', '', 'I want to open this link on ' + (side.host || '?')));
      fs.append(label);
      f.el.append(fs);
      f.needsConsent = true;
      f.consented = () => consent.checked;
      consent.addEventListener('change', () => setFormState(f, f.state, f.note.textContent));
      f.submit = el('button', 'primary', 'Open ' + (side.host || 'link'));
      f.submit.type = 'submit';
      f.open = () => { if (side.url) window.open(side.url, '_blank', 'noopener,noreferrer'); };
    } else {
      for (const field of Array.isArray(side.fields) ? side.fields : []) {
        const fs = el('fieldset', 'question');
        fs.dataset.id = field.name;
        fs.append(el('legend', '', (field.title || field.name) + (field.required ? ' *' : '')));
        if (field.description) fs.append(el('div', 'form-note', field.description));
        const opts = Array.isArray(field.options) ? field.options : [];
        const labels = Array.isArray(field.labels) && field.labels.length === opts.length ? field.labels : opts;
        let value;
        if (field.type === 'array') {
          const box = el('div', 'options');
          opts.forEach((o, i) => {
            const label = el('label', 'option');
            const inp = el('input');
            inp.type = 'checkbox';
            inp.value = o;
            inp.checked = Array.isArray(field.default) && field.default.includes(o);
            label.append(inp, el('span', '', labels[i]));
            box.append(label);
          });
          fs.append(box);
          value = () => [...box.querySelectorAll('input:checked')].map((x) => x.value);
        } else if (opts.length) {
          const sel = el('select', 'answer');
          sel.append(el('option', '', ''));
          opts.forEach((o, i) => {
            const op = el('option', '', labels[i]);
            op.value = o;
            if (field.default === o) op.selected = true;
            sel.append(op);
          });
          fs.append(sel);
          value = () => sel.value === '' ? undefined : sel.value;
        } else if (field.type === 'boolean') {
          const label = el('label', 'option');
          const inp = el('input');
          inp.type = 'checkbox';
          inp.checked = field.default === true;
          label.append(inp, el('span', '', 'yes'));
          fs.append(label);
          value = () => inp.checked;
        } else {
          const inp = el('input', 'answer');
          inp.type = field.type === 'number' || field.type === 'integer' ? 'number'
            : ({ email: 'email', uri: 'url', date: 'date', 'date-time': 'datetime-local' })[field.format] || 'text';
          if (field.type === 'integer') inp.step = '1';
          if (field.type === 'number') inp.step = 'any';
          if (field.default !== undefined && field.default !== null) inp.value = String(field.default);
          inp.setAttribute('aria-label', field.title || field.name);
          fs.append(inp);
          value = () => {
            if (inp.value === '') return undefined;
            return inp.type === 'number' ? Number(inp.value) : inp.value;
          };
        }
        f.questions.push({ id: field.name, value });
        f.el.append(fs);
      }
      f.submit = el('button', 'primary', 'Accept');
      f.submit.type = 'submit';
    }
    const decline = el('button', '', 'Decline');
    const cancel = el('button', '', 'Cancel');
    for (const [b, action] of [[decline, 'decline'], [cancel, 'cancel']]) {
      b.type = 'button';
      b.addEventListener('click', () => answerElicitation(f, action));
      f.buttons.push(b);
    }
    actions.append(f.submit, decline, cancel, f.note);
    f.el.append(f.error, actions);
    f.el.addEventListener('submit', (e) => { e.preventDefault(); answerElicitation(f, 'accept'); });
    st.forms.set(f.id, f);
    if (k) k.forms.push(f);
    setFormState(f, 'open', '');
    return f.el;
  }

  async function answerElicitation(f, action) {
    if (f.state !== 'open') return;
    if (action === 'accept' && f.needsConsent && !f.consented()) return;
    const body = { session_id: st.sessionId, form_id: f.id, action };
    if (action === 'accept' && !f.needsConsent) {
      body.content = {};
      for (const q of f.questions) {
        const v = q.value();
        if (v !== undefined) body.content[q.id] = v;
      }
    }
    if (action === 'accept' && f.open) f.open(); // consented: opened by the user's click
    formError(f, '');
    setFormState(f, 'sending', 'sending…');
    let res;
    try {
      res = await post('/api/form-answer', body);
    } catch (e) {
      res = { ok: false, data: { error: e.message } };
    }
    if (f.state !== 'sending') return;
    if (res.ok && res.data.success) {
      setFormState(f, 'answered', { accept: 'Accepted.', decline: 'Declined.', cancel: 'Cancelled.' }[action]);
    } else if (res.ok) {
      setFormState(f, 'closed', 'This request is no longer open' + (res.data.error ? ': ' + res.data.error : '.'));
    } else {
      formError(f, String(res.data.error || 'HTTP ' + res.status));
      setFormState(f, 'open', '');
    }
  }

  // personText is an error of the forms as a person reads it: what does
  // not fit, without the Go package's prefix ("interact: ") or the
  // "invalid answers: " the refusal says already. The answer handler
  // strips them from its 400s; a call that ended with such an error (its
  // tool result), a handler that does not strip them (another replica's
  // version, a host's own) and the other statuses still bring them.
  function personText(text) {
    return String(text).replace(/^(?:error:\s*)?(?:interact:\s*)?(?:invalid answers:\s*)?/, '');
  }

  function formError(f, text) {
    text = personText(text);
    f.error.textContent = text;
    f.error.hidden = !text;
  }

  async function answerForm(f) {
    if (f.state !== 'open') return;
    const answers = {};
    for (const q of f.questions) {
      const v = q.value();
      if (v !== undefined) answers[q.id] = v;
    }
    formError(f, '');
    setFormState(f, 'sending', 'sending…');
    let res;
    try {
      res = await post('/api/form-answer', { session_id: st.sessionId, form_id: f.id, answers });
    } catch (e) {
      res = { ok: false, data: { error: e.message } };
    }
    if (f.state !== 'sending') return; // closed meanwhile
    if (res.ok && res.data.success) {
      setFormState(f, 'answered', 'Answered.');
    } else if (res.ok) {
      setFormState(f, 'closed', 'This form is no longer open' + (res.data.error ? ': ' + res.data.error : '.'));
    } else {
      // What does not fit, as the handler says it to a person.
      formError(f, String(res.data.error || 'HTTP ' + res.status));
      setFormState(f, 'open', '');
    }
  }

  // closeForms disables the forms of a call that ended: its answers can no
  // longer be taken. One being sent is left to its answer.
  function closeForms(k) {
    let why = k.reason;
    if (k.state === 'done') {
      const r = String(k.result ?? '');
      why = r.startsWith('error') ? r.replace(/^error:\s*/, '') : '';
    }
    if (why) why = personText(why);
    for (const f of k.forms) {
      if (f.state === 'open') setFormState(f, 'closed', why ? 'Closed: ' + why : 'Closed.');
    }
  }

  // renderAnswers draws the answers of an ask_user_question result
  // ({"answers":[{question, answer}]}), for the history.
  function renderAnswers(result) {
    let v;
    try { v = JSON.parse(result); } catch { return null; }
    if (!v || !Array.isArray(v.answers)) return null;
    const table = el('table', 'fields answers');
    const tb = el('tbody');
    for (const a of v.answers) {
      const tr = el('tr');
      const ans = Array.isArray(a?.answer) ? a.answer.join(', ') : String(a?.answer ?? '');
      tr.append(shown('th', '', a?.question ?? a?.id ?? ''), shown('td', '', ans));
      tb.append(tr);
    }
    table.append(tb);
    return table;
  }

  // invalidatePending ends every card that still waits or runs: the server
  // no longer knows about it.
  function invalidatePending(reason) {
    for (const k of st.cards.values()) {
      if (FINAL.has(k.state)) continue;
      k.reason = reason;
      k.busy = false;
      setState(k, 'invalidated');
    }
  }

  async function post(path, body) {
    const r = await fetch(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    let data;
    try { data = await r.json(); } catch { data = { success: false, error: 'HTTP ' + r.status }; }
    return { status: r.status, ok: r.ok, data };
  }

  // decide answers an approval card through POST /api/tool-approve.
  async function decide(k, approved) {
    if (!k.approvalId || k.busy) return;
    k.busy = true;
    if (k.state === 'approval') render(k);
    let res;
    try {
      // Bound to the call this card shows: a card that shows another call
      // than the server holds is refused (409).
      res = await post('/api/tool-approve', {
        session_id: st.sessionId, approval_id: k.approvalId,
        call_id: k.id, tool: k.name, arguments_digest: k.digest, approved,
      });
    } catch (e) {
      k.busy = false;
      if (k.state === 'approval' || k.auto) setState(k, 'approval');
      system('error', 'Could not send the decision: ' + e.message);
      return;
    }
    if (res.ok && !res.data.success) {
      // The approval is not pending: the server restarted (approvals live in
      // memory) or it was already answered. Every pending card is stale.
      invalidatePending('the approval is no longer pending (the server may have restarted)');
      system('error', 'This approval is no longer pending — the server may have restarted. Pending tool cards were invalidated.');
      finishRun();
      return;
    }
    if (res.status === 409) {
      // The card shows another call than the server holds: it cannot be
      // answered from here.
      k.busy = false;
      k.reason = 'This card is out of date: it does not show the call the server holds. Reload the page to see it.';
      setState(k, 'invalidated');
      k.el.dataset.stale = 'true';
      return;
    }
    if (!res.ok) {
      k.busy = false;
      if (k.state === 'approval') render(k);
      system('error', 'The decision was refused: ' + (res.data.error || 'HTTP ' + res.status));
      return;
    }
    loadAuditSoon();
    if (approved) {
      k.busy = false;
      if (k.state === 'approval') setState(k, 'executing');
    }
    // A rejection stays busy ("sending decision…") until its tool_rejected
    // chunk arrives.
  }

  // ---- runs -----------------------------------------------------------------

  function updateButtons() {
    ui.send.disabled = !st.connected || st.running;
    ui.interrupt.hidden = !st.running;
    ui.interrupt.disabled = st.interrupting;
    ui.interrupt.textContent = st.interrupting ? 'Interrupting…' : 'Interrupt';
    ui.interrupt.classList.toggle('pending', st.interrupting);
    document.body.dataset.running = String(st.running);
    document.body.dataset.interrupting = String(st.interrupting);
  }

  // startRun shows a run starting. A resumed one goes on in the turn whose
  // cards waited; a new one starts a turn of its own, and the cards that
  // still wait (a turn its message closes) stay reachable for their
  // rejection.
  function startRun(resumed) {
    st.running = true;
    const open = st.openTurn;
    st.openTurn = null;
    // A resumed turn keeps its forms: one drawn from the history (a
    // suspended turn's) is not drawn again when the resumed call shows it.
    if (!(resumed && open)) st.forms = new Map();
    if (resumed && open) {
      dropWaitingNotes(); // decided: the turn goes on
      open.classList.remove('waiting');
      open.classList.add('live');
      st.turn = open;
      st.top = { body: open, textEl: null, reasonEl: null };
    } else {
      if (open) open.classList.remove('waiting');
      st.cards = new Map([...st.cards].filter(([, k]) => !FINAL.has(k.state)));
      st.turn = null;
    }
    const t = liveTurn();
    const th = el('div', 'thinking');
    th.append(el('span', 'spinner'));
    t.append(th);
    updateButtons();
  }

  // finishRun returns the page to idle.
  // finishRun returns the page to idle; the open forms close, unless
  // keepForms (a suspended run: its forms stay answerable, and an answer
  // resumes the turn).
  function finishRun(keepForms) {
    dropThinking();
    if (st.turn) {
      st.turn.classList.remove('live');
      if (st.turn.childElementCount === 0) st.turn.remove();
    }
    st.turn = st.top = null;
    for (const f of keepForms ? [] : st.forms.values()) {
      if (f.state === 'open') setFormState(f, 'closed', 'Closed: the run ended.');
    }
    st.running = false;
    st.turnId = 0;
    st.interrupting = false;
    clearTimeout(st.interruptTimer);
    st.interruptTimer = null;
    updateButtons();
  }

  function onRunDone(d) {
    if (!st.running && !st.turn) return; // already ended here (fallback, stale approval)
    if (d.turn && st.turnId && d.turn !== st.turnId) return; // an earlier turn's, late
    const userInterrupt = st.interrupting;
    let keepForms = false;
    dropWaitingNotes(); // the run ended: what waited was decided, or waits anew (said again below)
    switch (d.status) {
      case 'suspended':
        // The cards stay answerable: an answer resumes the turn.
        st.openTurn = st.turn;
        st.turn?.classList.add('waiting');
        if (d.reason) waitingNote('Suspended: ' + d.reason + '. The cards wait for your decision; the run goes on when you answer.');
        else waitingNote('Waiting for your decision: the run goes on when you answer a card.');
        keepForms = true;
        break;
      case 'interrupted':
        invalidateStopped();
        invalidatePending('interrupted');
        if (d.reason && !userInterrupt) system('interrupted', 'Interrupted: ' + d.reason + '.');
        else system('interrupted', 'Interrupted by the user.');
        break;
      case 'rejected':
        invalidatePending('the run ended');
        if (d.cause === 'timeout') system('timeout', 'Approval timed out: the tool call was rejected and the run ended.');
        else system('rejected', 'The run ended: a tool call was rejected.');
        break;
      case 'error':
        invalidatePending('the run failed');
        system('error', 'Error: ' + (d.error || 'the run failed'));
        break;
      default:
        invalidatePending('the run ended');
    }
    if (d.status === 'finished') flushSpeech();
    else stopSpeech();
    finishRun(keepForms);
    loadMCP();
    loadSessions();
    loadAuditSoon();
    loadLog();
  }

  async function interrupt() {
    if (!st.running || st.interrupting) return;
    st.interrupting = true;
    stopSpeech();
    updateButtons();
    // The server confirms with run_done; if it never does, do not leave the
    // page stuck.
    st.interruptTimer = setTimeout(() => {
      if (!st.interrupting) return;
      invalidatePending('interrupted');
      system('interrupted', 'Interrupted by the user (the server did not confirm within 15 s).');
      finishRun();
    }, INTERRUPT_FALLBACK_MS);
    try {
      const res = await post('/api/interrupt', { session_id: st.sessionId });
      const idle = res.ok && res.data.success && res.data.was_active === false && !res.data.cancelled;
      if (idle && st.interrupting) {
        // No run on the server: nothing will confirm.
        invalidatePending('interrupted');
        system('interrupted', 'Interrupted by the user.');
        finishRun();
      }
    } catch {
      // The fallback timer ends it.
    }
  }

  async function send(text) {
    text = text.trim();
    if (!text || st.running || !st.connected) return;
    addUser(text);
    toBottom();
    ui.input.value = '';
    autosize();
    st.sent = text; // drawn already: its run_started does not draw it again
    const resources = st.attachedRes.map((a) => ({ server: a.server, uri: a.uri }));
    st.sentAttached = resources.length > 0; // run_started has the text with the resources after it
    if (resources.length) {
      const m = [...ui.messages.querySelectorAll('.msg.user')].at(-1);
      for (const a of st.attachedRes) m.append(el('div', 'attachment', '[resource: ' + a.server + ' · ' + a.uri + ']'));
    }
    st.running = true; // until run_started / run_done say otherwise
    updateButtons();
    let res;
    try {
      const body = { session_id: st.sessionId, message: text, skills: chosenSkills() };
      if (resources.length) body.resources = resources;
      res = await post('/api/chat', body);
    } catch (e) {
      st.sent = null;
      system('error', 'Could not send: ' + e.message);
      finishRun();
      return;
    }
    if (!res.ok) {
      st.sent = null;
      system('error', 'Could not send: ' + (res.data.error || 'HTTP ' + res.status));
      if (res.status !== 409) finishRun(); // 409: a run is active; its run_done ends it
      return;
    }
    if (resources.length) setAttached([]);
    loadSessions(); // the first message stores the conversation, titled after it
  }

  // ---- the event stream -----------------------------------------------------

  function onChunk(c) {
    dropThinking();
    switch (c.kind) {
      case 'text': onText(c); break;
      case 'reasoning': onReasoning(c); break;
      case 'tool_call': onToolCall(c); break;
      case 'tool_rejected': onToolRejected(c); break;
      case 'side': onSide(c); break;
      case 'round_end': onRoundEnd(c); break;
      case 'warning': onWarning(c); break;
      case 'interrupted': break; // run_done follows and says why
    }
  }

  // onRunStarted: a run of the session starts, sent by this page or not
  // (another tab's, a resumed turn, or one this page reloaded in the middle
  // of: its events come from the log).
  function onRunStarted(d, seq) {
    if (seq && seq === st.turnId) return;
    const mine = st.sent !== null && (st.sent === d.message ||
      (st.sentAttached && typeof d.message === 'string' && d.message.startsWith(st.sent + '\n\n[Resource ')));
    if (d.message && !mine) addUser(d.message);
    st.sent = null;
    if (!st.running || !st.turn || d.resumed) startRun(!!d.resumed);
    st.turnId = seq;
  }

  // onReload: the server's log no longer holds what this page missed (it
  // restarted, or the page was away too long): the history is loaded again.
  function onReload() {
    const now = Date.now();
    st.reloads = st.reloads.filter((t) => now - t < 10000);
    if (st.reloads.length >= 3) {
      system('error', 'The server keeps asking to reload this conversation: reload the page.');
      return;
    }
    st.reloads.push(now);
    openSession(st.sessionId);
  }

  function setConnected(on) {
    st.connected = on;
    ui.conn.textContent = on ? 'connected' : 'offline';
    ui.conn.classList.toggle('off', !on);
    updateButtons();
  }

  // setOffline says whether the event stream is down (see st.offline) and
  // draws the pending cards and open forms again, their buttons disabled
  // with a note while it is.
  function setOffline(on) {
    if (st.offline === on) return;
    st.offline = on;
    document.body.dataset.offline = String(on);
    for (const k of st.cards.values()) {
      if (k.state === 'approval') render(k);
    }
    for (const f of st.forms.values()) {
      if (f.state === 'open') setFormState(f, 'open', '');
    }
  }

  function onHello(h) {
    setConnected(true);
    setOffline(false);
    loadMCP();
    loadSkills();
    loadSessions();
    setAPILog(h.api_log);
    loadLog();
    ui.model.textContent = h.model + (h.model_label ? ' · ' + h.model_label : '');
    ui.model.classList.toggle('demo', !!h.model_label);
    const restarted = st.instance !== '' && st.instance !== h.instance;
    const otherLog = st.log !== '' && st.log !== h.log;
    st.instance = h.instance;
    st.log = h.log;
    if (otherLog && h.durable) {
      // A restarted server (or another replica's log): the numbers this
      // page has mean nothing there. The conversation is loaded again from
      // the store, where its cards still wait.
      openSession(st.sessionId);
      return;
    }
    if (restarted) system('info', 'Reconnected to a restarted server.');
    // Without a replay the stream goes on from the log's end: the numbers
    // of a restarted server's log start again.
    if (!h.replay) st.lastSeq = h.seq || 0;
    if (h.busy && !st.running && !(h.turn > st.lastSeq)) {
      startRun(); // a run whose start this page will not be sent
    } else if (!h.busy && st.running && !st.interrupting) {
      // The run ended while we were away. Its cards stay as they are:
      // approving a stale one tells us so and invalidates them.
      finishRun();
    }
  }

  function connect() {
    clearTimeout(st.reconnectTimer);
    if (st.es) st.es.close();
    // From the last event this page has: the server sends what it missed.
    // (An EventSource that reconnects by itself says so in Last-Event-ID.)
    const es = new EventSource('/api/events?session_id=' + encodeURIComponent(st.sessionId) + '&after=' + st.lastSeq);
    st.es = es;
    const guard = (fn) => (e) => {
      if (st.es !== es) return;
      let data;
      try { data = parseKeeping(e.data, ['arguments', 'side']); } catch { return; }
      const seq = Number(e.lastEventId) || 0;
      if (seq > st.lastSeq) st.lastSeq = seq;
      const stick = nearBottom();
      fn(data, seq);
      if (stick) toBottom();
    };
    es.addEventListener('hello', guard(onHello));
    es.addEventListener('run_started', guard(onRunStarted));
    es.addEventListener('run_done', guard(onRunDone));
    es.addEventListener('session_deleted', guard(onSessionDeleted));
    es.addEventListener('reload', guard(onReload));
    es.onmessage = guard(onChunk);
    es.onerror = () => {
      if (st.es !== es) return;
      setConnected(false);
      setOffline(true);
      if (es.readyState === EventSource.CLOSED) {
        st.reconnectTimer = setTimeout(connect, RECONNECT_MS);
      }
    };
  }

  // ---- history --------------------------------------------------------------

  // renderHistory draws the stored messages. A call with its tool message
  // is drawn in the state it ended in (the message's outcome and cause, see
  // endCard), and a turn that a rejection or an interrupt ended gets the
  // system message the live page showed (see endTurn). A call without its
  // tool message is drawn as the server says (open_calls): a card that
  // waits for a decision is answerable, and the cards of that turn stay
  // reachable, so the chunks of the turn when it is resumed go on in it.
  // running says a run is in progress: its calls not stored yet come with
  // its events.
  function renderHistory(msgs, running) {
    let turn = null;
    let ended = []; // the cards of the turn's calls, and how they ended
    const close = () => {
      if (turn && turn !== st.openTurn) endTurn(ended); // a turn with open calls goes on
      ended = [];
    };
    for (const [i, m] of msgs.entries()) {
      if (m.role === 'user') {
        close();
        addUser(m.content || '', m.images);
        turn = null;
        continue;
      }
      if (!turn) turn = add(el('div', 'turn'));
      if (m.role === 'tool') {
        const e = ended.find((x) => x.id === m.tool_call_id);
        if (e) e.last = true; // answered after the turn's last assistant message so far
        continue;
      }
      if (m.role !== 'assistant') continue;
      for (const e of ended) e.last = false; // the turn went on after them
      if (m.text && m.text.trim()) turn.append(shown('div', 'text', m.text.trim()));
      const open = new Map((m.open_calls || []).map((o) => [o.call_id, o]));
      const answers = answersOf(msgs, i);
      for (const [x, tc] of (m.tool_calls || []).entries()) {
        const k = newCard(turn, tc.id, tc.id, tc.name);
        if (tc.arguments !== undefined) setArgs(k, tc); // the JSON object itself, and its text
        const o = open.get(tc.id);
        const a = answers[x];
        if (a) {
          endCard(k, a);
          ended.push({ id: tc.id, k, outcome: a.outcome || '', cause: a.cause || '', last: false });
          continue;
        }
        if (!o && !running) {
          // Neither answered nor open: a history from before open calls
          // were kept. Nobody knows how it ended.
          k.result = '';
          setState(k, 'unknown');
          continue;
        }
        switch (o?.state) {
          case 'approval':
          case 'pending':
            k.approvalId = o.approval_id || '';
            k.digest = o.arguments_digest || '';
            setState(k, 'approval');
            break;
          case 'rejected':
            k.reason = o.reason || '';
            setState(k, 'rejected');
            break;
          default: // approved, executing, or what the run's events will say
            setState(k, 'executing');
            if (o?.form || o?.elicitation) {
              // A form that waits for the user's answers, perhaps in a
              // suspended turn: answerable again.
              const box = o.form ? renderForm(o.form, null, k) : renderElicitation(o.elicitation, null, k);
              if (box) { k.sides.push(box); render(k); }
            }
        }
        st.cards.set(tc.id, k);
        st.openTurn = turn;
      }
    }
    close();
    loadAuditSoon();
    if (st.openTurn && !running) {
      st.openTurn.classList.add('waiting');
      if ([...st.cards.values()].some((k) => k.state === 'approval' && k.approvalId)) {
        waitingNote('Waiting for your decision: the run goes on when you answer a card.');
      }
    }
    toBottom();
  }

  // answersOf returns, for each call of the assistant message msgs[i], the
  // tool message that answers it, or undefined: the first for its id among
  // the tool messages right after the message, as memory.Repair pairs them
  // for the model. Call ids repeat across messages (call_0 of every
  // reply), and a tool message elsewhere, or a second answer, is not what
  // the model reads: a card shows what it does.
  function answersOf(msgs, i) {
    const calls = msgs[i].tool_calls || [];
    const out = new Array(calls.length);
    for (let j = i + 1; j < msgs.length && msgs[j].role === 'tool'; j++) {
      const x = calls.findIndex((c, y) => out[y] === undefined && c.id === msgs[j].tool_call_id);
      if (x >= 0) out[x] = msgs[j];
    }
    return out;
  }

  // The causes (agent.Cause) of rejections that end a run with no system
  // message of their own: the model is told and goes on, the call never
  // got its turn, or the user moved on. Any other rejection ends the run
  // ("The run ended: a tool call was rejected.").
  const GOES_ON = new Set(['invalid_arguments', 'unknown_tool', 'incomplete', 'not_run', 'stopped', 'moved_on']);

  // endCard draws a stored call as it ended, from its tool message m (its
  // outcome and cause, memory.Message): a result is done; a rejection is
  // drawn as its tool_rejected chunk was (onToolRejected), its reason
  // apart from the output the tool wrote before it was stopped; a message
  // that does not say (stored before outcomes were kept, or a v2 export)
  // is unknown, never done.
  function endCard(k, m) {
    const content = m.content || '';
    switch (m.outcome) {
      case 'result':
        k.result = content;
        setState(k, 'done');
        return;
      case 'rejected': {
        // joinPartial: the partial output, then "\n[reason]".
        const i = content.lastIndexOf('\n[');
        if ((m.cause === 'interrupted' || m.cause === 'stopped') && i >= 0 && content.endsWith(']')) {
          k.output = content.slice(0, i);
          k.reason = content.slice(i + 2, -1);
        } else {
          k.reason = content;
        }
        setState(k, STOPPED.has(m.cause) ? 'invalidated' : 'rejected');
        return;
      }
    }
    k.result = content;
    setState(k, 'unknown');
  }

  // endTurn shows how a stored turn ended when its last calls were
  // rejected and nothing came after them, with the system message the
  // live page showed at its run_done: an interrupt (its rejected cards
  // turned invalidated, as invalidateStopped does), an approval that timed
  // out, or a rejection that ended the session. ended lists the turn's
  // answered calls; last marks those after its last assistant message.
  function endTurn(ended) {
    const last = ended.filter((e) => e.last && e.outcome === 'rejected');
    if (last.length === 0) return;
    const causes = new Set(last.map((e) => e.cause));
    if (causes.has('interrupted') || causes.has('approval_interrupted') ||
        (causes.has('not_run') && [...causes].every((c) => GOES_ON.has(c)))) {
      for (const e of ended) if (e.k.state === 'rejected') setState(e.k, 'invalidated');
      system('interrupted', 'Interrupted by the user.');
    } else if (causes.has('timeout')) {
      system('timeout', 'Approval timed out: the tool call was rejected and the run ended.');
    } else if ([...causes].some((c) => !GOES_ON.has(c))) {
      system('rejected', 'The run ended: a tool call was rejected.');
    }
  }

  // loadHistory draws the session's stored messages, and takes the number
  // of the last event they include, from which the event stream goes on. It
  // returns false when the session is not this browser's (401, 403): its
  // owner cookie changed.
  async function loadHistory() {
    try {
      const r = await fetch('/api/history?session_id=' + encodeURIComponent(st.sessionId));
      if (r.status === 401 || r.status === 403) return false;
      if (!r.ok) return true;
      st.lastSeq = Number(r.headers.get('X-Session-Seq')) || 0;
      const msgs = parseKeeping(await r.text(), ['arguments']);
      if (Array.isArray(msgs)) renderHistory(msgs, r.headers.get('X-Session-Running') === 'true');
    } catch {
      // An empty page is fine.
    }
    return true;
  }

  // newSessionId asks the server for a session id of this browser's: the
  // server binds it to the browser's owner cookie.
  async function newSessionId() {
    const res = await post('/api/sessions', {});
    if (!res.ok || !res.data.session_id) throw new Error(res.data.error || 'HTTP ' + res.status);
    return res.data.session_id;
  }

  async function openSession(id) {
    if (st.es) { st.es.close(); st.es = null; }
    clearTimeout(st.reconnectTimer);
    stopSpeech();
    st.sessionId = id;
    localStorage.setItem(SESSION_KEY, id);
    // Resources belong to a session's conversation (a per_conversation
    // server's instance): another session starts without them.
    setAttached([]);
    ui.resourcePanel.hidden = true;
    ui.attach.setAttribute('aria-expanded', 'false');
    ui.session.textContent = 'session ' + id;
    renderSessions();
    finishRun();
    st.cards = new Map();
    st.forms = new Map();
    st.openTurn = null;
    st.turnId = 0;
    st.lastSeq = 0;
    st.sent = null;
    st.decisions = [];
    st.allCards = [];
    st.auditSeq++;
    renderAudit();
    ui.messages.replaceChildren(ui.empty);
    ui.empty.hidden = false;
    setConnected(false);
    if (!(await loadHistory())) {
      await openNewSession();
      return;
    }
    connect();
  }

  async function openNewSession() {
    let id;
    try {
      id = await newSessionId();
    } catch (e) {
      system('error', 'Could not open a session: ' + e.message);
      return;
    }
    await openSession(id);
  }

  // ---- conversations (the sidebar) -------------------------------------------
  //
  // GET /api/sessions lists this browser's stored conversations, most recent
  // first (the server knows the browser by its owner cookie). A conversation
  // is stored with its first message, titled after it; until then the open
  // one shows at the top as "New conversation". Each stored one can be
  // opened, renamed, exported as JSON and deleted; Import… adds an export as
  // a new conversation of this browser.

  async function loadSessions() {
    const seq = ++st.sessionsSeq;
    let list;
    try {
      const r = await fetch('/api/sessions');
      if (!r.ok) return;
      list = await r.json();
    } catch {
      return; // the next run or connect tries again
    }
    if (seq !== st.sessionsSeq || !Array.isArray(list)) return;
    st.sessions = list;
    renderSessions();
  }

  // renderSessions draws the list. An item that shows the same as before
  // is kept, and the list is left alone when nothing changed: a click on it
  // must not fall between two elements because the list came back from the
  // server meanwhile. force draws every item anew (after an edit of one).
  function renderSessions(force) {
    if (st.renaming) return; // drawn again when the edit ends
    const list = [];
    if (st.sessionId && !st.sessions.some((s) => s.id === st.sessionId)) list.push([{ id: st.sessionId }, false]);
    for (const s of st.sessions) list.push([s, true]);
    const drawn = new Map();
    const items = list.map(([s, stored]) => {
      const sig = JSON.stringify([s.title, s.created_at, s.updated_at, s.busy, stored, s.id === st.sessionId]);
      const old = st.sessionItems.get(s.id);
      const li = !force && old && old.sig === sig ? old.li : sessionItem(s, stored);
      drawn.set(s.id, { li, sig });
      return li;
    });
    st.sessionItems = drawn;
    const kids = ui.sessions.children;
    if (items.length !== kids.length || items.some((li, i) => kids[i] !== li)) ui.sessions.replaceChildren(...items);
  }

  function whenText(s) {
    const t = new Date(s.updated_at || s.created_at || NaN);
    if (isNaN(t)) return '';
    const now = new Date();
    if (t.toDateString() === now.toDateString()) return t.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    const opts = { month: 'short', day: 'numeric' };
    if (t.getFullYear() !== now.getFullYear()) opts.year = 'numeric';
    return t.toLocaleDateString([], opts);
  }

  function sessionItem(s, stored) {
    const li = el('li', 'session-item');
    li.dataset.sessionId = s.id;
    if (s.id === st.sessionId) li.setAttribute('aria-current', 'true');
    const title = plain(s.title) || (stored ? 'Untitled' : 'New conversation');
    const open = el('button', 'open');
    open.type = 'button';
    open.title = title;
    open.append(el('span', 'title' + (plain(s.title) ? '' : ' untitled'), title));
    if (stored) open.append(el('span', 'when' + (s.busy ? ' busy' : ''), whenText(s)));
    open.addEventListener('click', () => choose(s.id));
    li.append(open);
    if (stored) {
      const actions = el('span', 'actions');
      actions.append(
        action('rename', '✎', 'rename', () => startRename(li, s)),
        action('export', '↓', 'export as JSON', () => exportSession(s)),
        action('delete', '✕', 'delete', (b) => deleteSession(s, b)),
      );
      li.append(actions);
    }
    return li;
  }

  function action(cls, label, title, fn) {
    const b = el('button', cls, label);
    b.type = 'button';
    b.title = title;
    b.setAttribute('aria-label', title);
    b.addEventListener('click', () => fn(b));
    return b;
  }

  // status says something about the list under its head: an error stays
  // until the next word, anything else for a few seconds.
  function status(text, error) {
    clearTimeout(st.statusTimer);
    ui.sessionsStatus.textContent = text;
    ui.sessionsStatus.classList.toggle('error', !!error);
    ui.sessionsStatus.hidden = false;
    if (!error) st.statusTimer = setTimeout(() => { ui.sessionsStatus.hidden = true; }, 5000);
  }

  function choose(id) {
    if (narrow.matches) setSidebar('auto');
    if (id !== st.sessionId) openSession(id);
  }

  function startRename(li, s) {
    st.renaming = s.id;
    const input = el('input', 'rename-input');
    input.value = s.title || '';
    input.maxLength = 120;
    input.setAttribute('aria-label', 'title of the conversation');
    li.replaceChildren(input);
    input.focus();
    input.select();
    let ended = false;
    const end = async (save) => {
      if (ended) return;
      ended = true;
      const title = input.value.trim();
      if (save && title && title !== s.title) {
        let res;
        try {
          res = await post('/api/sessions/rename', { session_id: s.id, title });
        } catch (e) {
          res = { ok: false, data: { error: e.message } };
        }
        if (res.ok) s.title = title; // until the list comes back
        else status('Could not rename: ' + (res.data.error || 'HTTP ' + res.status), true);
      }
      st.renaming = '';
      renderSessions(true);
      loadSessions();
    };
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.isComposing) { e.preventDefault(); end(true); }
      else if (e.key === 'Escape') { e.preventDefault(); end(false); }
    });
    input.addEventListener('blur', () => end(true));
  }

  function exportName(s) {
    const slug = (s.title || '').toLowerCase().replace(/[^\p{L}\p{N}]+/gu, '-').replace(/^-+|-+$/g, '').slice(0, 48);
    return 'planround-' + (slug || s.id) + '.json';
  }

  async function exportSession(s) {
    let blob;
    try {
      const r = await fetch('/api/sessions/export?session_id=' + encodeURIComponent(s.id));
      if (!r.ok) {
        let msg = '';
        try { msg = (await r.json()).error; } catch { /* not JSON */ }
        status('Could not export: ' + (msg || 'HTTP ' + r.status), true);
        return;
      }
      blob = await r.blob();
    } catch (e) {
      status('Could not export: ' + e.message, true);
      return;
    }
    const a = el('a');
    a.href = URL.createObjectURL(blob);
    a.download = exportName(s);
    a.hidden = true;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 30000);
    status('Exported ' + a.download);
  }

  // deleteSession deletes on a second click: the first arms the button.
  async function deleteSession(s, b) {
    if (!b.classList.contains('armed')) {
      b.classList.add('armed');
      b.textContent = 'Delete?';
      b.title = 'click again to delete this conversation';
      const disarm = () => {
        clearTimeout(b.disarmTimer);
        b.classList.remove('armed');
        b.textContent = '✕';
        b.title = 'delete';
      };
      b.disarmTimer = setTimeout(disarm, 4000);
      b.addEventListener('blur', disarm, { once: true });
      return;
    }
    st.deleting = s.id;
    let res;
    try {
      res = await post('/api/sessions/delete', { session_id: s.id });
    } catch (e) {
      res = { ok: false, data: { error: e.message } };
    }
    st.deleting = '';
    if (!res.ok) {
      status('Could not delete: ' + (res.data.error || 'HTTP ' + res.status), true);
      renderSessions(true);
      return;
    }
    st.sessions = st.sessions.filter((x) => x.id !== s.id);
    status('Deleted ' + (plain(s.title) ? '“' + plain(s.title) + '”' : 'the conversation'));
    if (s.id === st.sessionId) await openNewSession();
    else renderSessions();
    loadSessions();
  }

  // onSessionDeleted: the open conversation was deleted, in another tab.
  function onSessionDeleted() {
    if (st.deleting === st.sessionId) return; // this page's own: deleteSession goes on
    st.sessions = st.sessions.filter((x) => x.id !== st.sessionId);
    status('This conversation was deleted in another tab.');
    openNewSession();
  }

  async function importFile(file) {
    let res;
    try {
      const r = await fetch('/api/sessions/import', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: await file.text(),
      });
      let data;
      try { data = await r.json(); } catch { data = { error: 'HTTP ' + r.status }; }
      res = { ok: r.ok, data };
    } catch (e) {
      res = { ok: false, data: { error: e.message } };
    }
    if (!res.ok || !res.data.session_id) {
      status('Could not import ' + plain(file.name) + ': ' + (res.data.error || 'no session'), true);
      return;
    }
    // What the server left out: what the model would have read and the
    // page never shows (hook injections, system messages, summaries).
    const left = [[res.data.left_out_messages, 'message'], [res.data.left_out_summaries, 'summary']]
      .filter(([n]) => n > 0).map(([n, what]) => n + ' ' + (n === 1 ? what : what === 'summary' ? 'summaries' : what + 's'));
    status('Imported ' + plain(file.name) + (left.length ? ', without ' + left.join(' and ') + ' the page would not have shown' : ''));
    if (narrow.matches) setSidebar('auto');
    // Listed at once, until the list comes back from the server.
    st.sessions.unshift({ id: res.data.session_id, title: res.data.title || '', updated_at: new Date().toISOString() });
    await openSession(res.data.session_id);
    loadSessions();
  }

  // ---- the sidebar: beside the chat, a drawer on a narrow screen --------------

  const narrow = window.matchMedia('(max-width: 800px)');

  // setSidebar sets the sidebar open, closed, or auto (beside the chat on a
  // wide screen, hidden on a narrow one).
  function setSidebar(state) {
    document.body.dataset.sidebar = state;
    ui.sidebarToggle.setAttribute('aria-expanded', String(getComputedStyle(ui.sidebar).display !== 'none'));
  }

  function toggleSidebar() {
    setSidebar(getComputedStyle(ui.sidebar).display !== 'none' ? 'closed' : 'open');
  }

  // ---- skills (the sidebar's picker) -------------------------------------------
  //
  // GET /api/skills lists the server's skills; a tick enables one for the
  // runs of this browser, and each message says which are enabled. The
  // ticks are kept in localStorage by name; a skill never ticked nor
  // unticked is enabled, as the server enables every skill of a message
  // that names none.

  function loadSkillChoice() {
    try {
      const v = JSON.parse(localStorage.getItem(SKILLS_KEY) || '{}');
      const out = {};
      if (v && typeof v === 'object' && !Array.isArray(v)) {
        for (const [k, on] of Object.entries(v)) if (typeof on === 'boolean') out[k] = on;
      }
      return out;
    } catch { return {}; }
  }

  function skillEnabled(name) { return st.skillChoice[name] !== false; }

  // chosenSkills is the "skills" of a chat message: the enabled ones among
  // the server's, or, before the list came, every one ticked (undefined, no
  // field, when nothing was ever unticked: all of them).
  function chosenSkills() {
    if (st.skills) return st.skills.length ? st.skills.filter((x) => skillEnabled(x.name)).map((x) => x.name) : undefined;
    if (!Object.values(st.skillChoice).includes(false)) return undefined;
    return Object.keys(st.skillChoice).filter((n) => st.skillChoice[n]);
  }

  async function loadSkills() {
    let list;
    try {
      const r = await fetch('/api/skills');
      if (!r.ok) return;
      list = await r.json();
    } catch {
      return; // the next connect tries again
    }
    if (!Array.isArray(list)) return;
    st.skills = list.filter((x) => x && typeof x.name === 'string');
    renderSkills();
  }

  function renderSkills() {
    const list = st.skills || [];
    ui.skillsBox.hidden = list.length === 0;
    const items = list.map((x) => {
      const li = el('li', 'skill');
      li.dataset.skill = x.name;
      const label = el('label');
      const box = el('input');
      box.type = 'checkbox';
      box.checked = skillEnabled(x.name);
      box.addEventListener('change', () => {
        st.skillChoice[x.name] = box.checked;
        localStorage.setItem(SKILLS_KEY, JSON.stringify(st.skillChoice));
      });
      const text = el('span', 'skill-text');
      text.append(el('span', 'name', plain(x.name)), el('span', 'description', x.description ?? ''));
      label.title = x.description ?? '';
      label.append(box, text);
      li.append(label);
      return li;
    });
    ui.skills.replaceChildren(...items);
  }

  // ---- speech -------------------------------------------------------------------
  //
  // With the toggle on (it is off until turned on; the choice is kept in
  // localStorage), the text of replies the model flagged for voice is read
  // aloud by the browser (speechSynthesis), a sentence at a time as it
  // streams in. Stored replies are never read, nor is anything after an
  // interrupt.

  const canSpeak = 'speechSynthesis' in window && typeof SpeechSynthesisUtterance === 'function';

  // A sentence ends at . ! ? before white space (not in 3.14), at CJK 。！？,
  // or at a line end; what follows the last one waits for more text.
  const SENTENCE_END = /[.!?](?=\s)|[。！？]|\n/;

  function renderSpeech() {
    ui.speech.hidden = !canSpeak;
    ui.speech.setAttribute('aria-pressed', String(st.speech));
    ui.speech.title = st.speech ? 'voice replies are read aloud: click to stop' : 'read voice replies aloud';
  }

  function setSpeech(on) {
    st.speech = on;
    localStorage.setItem(SPEECH_KEY, on ? 'on' : 'off');
    if (!on) stopSpeech();
    renderSpeech();
  }

  function say(text) {
    text = text.trim();
    if (text) speechSynthesis.speak(new SpeechSynthesisUtterance(text));
  }

  function speak(text) {
    if (!st.speech || !canSpeak) return;
    st.speechBuf += text;
    for (let m; (m = SENTENCE_END.exec(st.speechBuf));) {
      const end = m.index + m[0].length;
      say(st.speechBuf.slice(0, end));
      st.speechBuf = st.speechBuf.slice(end);
    }
  }

  function flushSpeech() {
    if (st.speech && canSpeak) say(st.speechBuf);
    st.speechBuf = '';
  }

  function stopSpeech() {
    st.speechBuf = '';
    if (canSpeak) speechSynthesis.cancel();
  }

  // ---- wiring ---------------------------------------------------------------

  function autosize() {
    ui.input.style.height = 'auto';
    ui.input.style.height = Math.min(ui.input.scrollHeight + 2, 160) + 'px';
  }

  ui.form.addEventListener('submit', (e) => { e.preventDefault(); send(ui.input.value); });
  ui.input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(ui.input.value); }
  });
  ui.input.addEventListener('input', autosize);
  ui.interrupt.addEventListener('click', interrupt);
  ui.newChat.addEventListener('click', () => { if (!st.running) openNewSession(); });
  ui.mcp.addEventListener('click', toggleMCP);
  ui.attach.addEventListener('click', toggleResources);
  ui.audit.addEventListener('click', toggleAudit);
  ui.apilog.addEventListener('click', toggleLog);
  ui.speech.addEventListener('click', () => setSpeech(!st.speech));
  ui.sidebarToggle.addEventListener('click', toggleSidebar);
  // A drawer closes when the chat behind it is touched.
  $('chat').addEventListener('pointerdown', () => {
    if (narrow.matches && document.body.dataset.sidebar === 'open') setSidebar('auto');
  });
  narrow.addEventListener('change', () => setSidebar('auto'));
  ui.import.addEventListener('click', () => ui.importFile.click());
  ui.importFile.addEventListener('change', () => {
    const f = ui.importFile.files[0];
    ui.importFile.value = '';
    if (f) importFile(f);
  });
  for (const b of document.querySelectorAll('.suggest')) {
    b.addEventListener('click', () => { ui.input.value = b.textContent; ui.input.focus(); autosize(); });
  }

  // A narrow screen has no room for the keyboard hint: the placeholder
  // follows the width, also when the window is resized or a phone turned.
  const fullPlaceholder = ui.input.placeholder;
  const phone = window.matchMedia('(max-width: 600px)');
  const fitPlaceholder = () => {
    ui.input.placeholder = phone.matches ? 'Message' : fullPlaceholder;
    autosize();
  };
  phone.addEventListener('change', fitPlaceholder);
  fitPlaceholder();
  renderAuto();
  renderSpeech();
  setSidebar('auto');
  const saved = localStorage.getItem(SESSION_KEY);
  if (saved && /^[0-9a-f]{32}-[0-9a-f]{16}$/.test(saved)) openSession(saved);
  else openNewSession();
})();
