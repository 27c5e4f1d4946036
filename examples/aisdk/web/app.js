// The page: a chat on the ai package's own client (AbstractChat with
// DefaultChatTransport, from the vendored ai-client.js) against planround's
// ui/aisdk handler at /api/chat. Everything the model or a tool says is
// drawn as text (textContent), never as HTML.
import { AbstractChat, DefaultChatTransport } from './ai-client.js';

const $ = sel => document.querySelector(sel);

// ChatState keeps the chat's state for AbstractChat and draws the page
// again when it changes.
class ChatState {
  #status = 'ready';
  #error = undefined;
  #messages = [];
  constructor(onChange) { this.onChange = onChange; }
  get status() { return this.#status; }
  set status(v) { this.#status = v; this.onChange(); }
  get error() { return this.#error; }
  set error(v) { this.#error = v; this.onChange(); }
  get messages() { return this.#messages; }
  set messages(v) { this.#messages = v; this.onChange(); }
  pushMessage = m => { this.messages = this.#messages.concat(m); };
  popMessage = () => { this.messages = this.#messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = this.#messages.with(i, m); };
  snapshot = v => structuredClone(v);
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new ChatState(scheduleRender) }); }
}

// A chat id of the page's own (the server gives it to this browser).
function newID() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, x => x.toString(16).padStart(2, '0')).join('');
}

// The chat of the page is the one its address names (/#<id>), so that a
// reload shows it again; a page without one starts a new chat and names
// it there.
function chatID() {
  const id = decodeURIComponent(location.hash.slice(1));
  if (/^[A-Za-z0-9_-]{1,64}$/.test(id)) return id;
  const fresh = newID();
  history.replaceState(null, '', `#${fresh}`);
  return fresh;
}

// Send the approvals once every approval of the message has an answer.
const approvalsAnswered = ({ messages }) => {
  const m = messages.at(-1);
  return m?.role === 'assistant' &&
    m.parts.some(p => p.state === 'approval-responded') &&
    !m.parts.some(p => p.state === 'approval-requested');
};

const chat = new Chat({
  id: chatID(),
  transport: new DefaultChatTransport({ api: '/api/chat' }),
  sendAutomaticallyWhen: approvalsAnswered,
  onError: () => scheduleRender(),
});

// Another chat named in the address: load that one.
window.addEventListener('hashchange', () => location.reload());

// loaded is set once the chat's messages are loaded: sending before
// would lose them.
let loaded = false;

// Drafts of the forms' answers, by form id, the forms sent, and the
// messages whose turn the Stop button stopped.
const drafts = new Map();
const sentForms = new Set();
const stopped = new Set();

let scheduled = false;
function scheduleRender() {
  if (scheduled) return;
  scheduled = true;
  queueMicrotask(() => { scheduled = false; render(); });
}

const busy = () => chat.status === 'submitted' || chat.status === 'streaming';

// waiting reports whether the turn waits for a person (an approval, a form).
function waiting() {
  const m = chat.messages.at(-1);
  return m?.role === 'assistant' && m.metadata?.planround?.status === 'waiting' && !stopped.has(m.id);
}

function render() {
  $('#status').textContent = chat.error ? `error: ${chat.error.message}` : chat.status;
  $('#send').disabled = busy() || !loaded;
  $('#stop').disabled = !busy() && !waiting();
  document.body.dataset.status = chat.status;
  $('#messages').replaceChildren(...chat.messages.map(drawMessage));
  if (busy()) $('#messages').lastElementChild?.scrollIntoView({ block: 'end' });
}

// el makes an element with a class and text.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// HIDDEN: the characters of a call's arguments that do not show for what
// they are (format characters such as bidi controls and zero-width ones,
// line and paragraph separators, private use, unassigned and surrogate
// code points, every space but U+0020), which argumentsView shows as their
// JSON escapes, marked: a person approves what the call runs with.
const HIDDEN = /(?! )[\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\p{Zs}]/gu;

// argumentsView draws a call's arguments from the text the model wrote
// (toolMetadata.planround.arguments_text, live and in the history), not
// from what JSON.parse made of it, which rounds large numbers and keeps
// one of two members of the same name; its hidden characters escaped.
function argumentsView(p) {
  const text = p.toolMetadata?.planround?.arguments_text ?? JSON.stringify(p.input ?? {});
  const pre = el('pre', 'input');
  let at = 0;
  for (const m of text.matchAll(HIDDEN)) {
    if (m.index > at) pre.append(text.slice(at, m.index));
    let esc = '';
    for (let i = 0; i < m[0].length; i++) esc += '\\u' + m[0].charCodeAt(i).toString(16).toUpperCase().padStart(4, '0');
    const mark = el('span', 'cf', esc);
    mark.title = 'invisible character U+' + m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    pre.append(mark);
    at = m.index + m[0].length;
  }
  if (at < text.length) pre.append(text.slice(at));
  return pre;
}

function drawMessage(m) {
  const div = el('div', `msg ${m.role}`);
  // A call whose card or form is drawn shows no arguments of its own.
  const shown = new Set(m.parts.filter(p => p.type === 'data-planround-card' || p.type === 'data-planround-form').map(p => p.data.toolCallId));
  for (const p of m.parts) {
    const e = drawPart(p, m, shown);
    if (e) div.append(e);
  }
  const meta = m.metadata?.planround;
  if (meta && meta.status !== 'finished' && meta.status !== 'waiting') {
    div.append(el('div', 'error', `turn ${meta.status}${meta.reason ? `: ${meta.reason}` : ''}`));
  }
  return div;
}

function drawPart(p, m, shown) {
  if (p.type === 'text') return el('div', 'text', p.text);
  if (p.type === 'dynamic-tool' || p.type.startsWith('tool-')) return drawTool(p, !stopped.has(m.id), shown.has(p.toolCallId));
  if (p.type === 'data-planround-card') return drawCard(p.data.payload);
  if (p.type === 'data-planround-form') return drawForm(p.data, m);
  if (p.type === 'data-planround-rejection') return el('div', 'error', `rejected (${p.data.cause}): ${p.data.reason}`);
  if (p.type === 'data-planround-warning') return el('div', 'error', p.data.text);
  return null; // reasoning, steps, rounds
}

// drawTool draws a tool part: its name, state and input, its approval's
// buttons, its outcome. A part whose card or form is drawn (brief) shows
// only its name and state; a part of a stopped turn, no buttons.
function drawTool(p, live, brief) {
  const name = p.type === 'dynamic-tool' ? p.toolName : p.type.slice('tool-'.length);
  const div = el('div', 'tool');
  div.dataset.tool = name;
  div.dataset.state = p.state;
  const head = el('div');
  const waitsHere = p.state === 'approval-requested' && live;
  head.append(el('span', 'name', name), el('span', 'state', p.state === 'approval-requested' && !live ? 'stopped' : stateWords(p)));
  div.append(head);
  if (brief) return div;
  div.append(argumentsView(p));
  if (waitsHere) {
    if (p.approval.reason) div.append(el('div', 'reason', p.approval.reason));
    const approve = el('button', 'approve', 'Approve');
    const deny = el('button', 'deny', 'Deny');
    approve.onclick = () => chat.addToolApprovalResponse({ id: p.approval.id, approved: true });
    deny.onclick = () => chat.addToolApprovalResponse({ id: p.approval.id, approved: false, reason: 'denied in the page' });
    div.append(approve, deny);
  }
  if (p.state === 'output-available') {
    div.append(el('pre', 'output', typeof p.output === 'string' ? p.output : JSON.stringify(p.output, null, 2)));
  }
  if (p.state === 'output-error') div.append(el('pre', 'error', p.errorText));
  if (p.state === 'output-denied') div.append(el('div', 'error', 'denied'));
  return div;
}

// stateWords says a tool part's state in words.
function stateWords(p) {
  switch (p.state) {
    case 'input-streaming': return 'preparing';
    case 'input-available': return 'running';
    case 'approval-requested': return 'waiting for your approval';
    case 'approval-responded': return p.approval?.approved ? 'approved' : 'denied';
    case 'output-available': return 'done';
    case 'output-error': return 'failed';
    case 'output-denied': return 'denied';
  }
  return p.state;
}

function drawCard(card) {
  const div = el('div', 'card');
  div.append(el('div', 'title', card.title));
  if (card.body) div.append(el('div', 'body', card.body));
  for (const f of card.fields ?? []) div.append(el('div', 'field', `${f.name}: ${f.value}`));
  return div;
}

// drawForm draws an ask_user_question form; it is answered with the chat's
// next request, whose body carries planround.form.
function drawForm(data, m) {
  const form = data.payload;
  const call = m.parts.find(p => p.toolCallId === data.toolCallId && p.type === 'dynamic-tool');
  const open = !sentForms.has(form.form_id) && !call?.state?.startsWith('output-') && waiting();
  const draft = drafts.get(form.form_id) ?? {};
  drafts.set(form.form_id, draft);
  const f = el('form', 'form');
  f.dataset.form = form.form_id;
  if (form.title) f.append(el('div', 'title', form.title));
  for (const q of form.questions) {
    const set = el('fieldset');
    set.disabled = !open;
    set.append(el('legend', '', q.question));
    if (q.kind === 'text') {
      const input = el('input');
      input.name = q.id;
      input.value = draft[q.id] ?? '';
      input.oninput = () => { draft[q.id] = input.value; };
      set.append(input);
    } else {
      const multiple = q.kind === 'multiple';
      for (const opt of q.options) {
        const label = el('label');
        const input = el('input');
        input.type = multiple ? 'checkbox' : 'radio';
        input.name = q.id;
        input.value = opt;
        input.checked = multiple ? (draft[q.id] ?? []).includes(opt) : draft[q.id] === opt;
        input.onchange = () => {
          draft[q.id] = multiple
            ? [...set.querySelectorAll('input:checked')].map(i => i.value)
            : opt;
        };
        label.append(input, ` ${opt} `);
        set.append(label);
      }
    }
    f.append(set);
  }
  const send = el('button', 'answer', open ? 'Send answers' : 'answered');
  send.type = 'submit';
  send.disabled = !open;
  f.append(send);
  f.onsubmit = e => {
    e.preventDefault();
    const answers = {};
    for (const q of form.questions) answers[q.id] = draft[q.id] ?? (q.kind === 'multiple' ? [] : '');
    sentForms.add(form.form_id);
    chat.sendMessage(undefined, { body: { planround: { form: { id: form.form_id, answers } } } });
  };
  return f;
}

$('#composer').onsubmit = e => {
  e.preventDefault();
  const text = $('#input').value.trim();
  if (!text || busy()) return;
  $('#input').value = '';
  chat.sendMessage({ text });
};

// Stop: the server stops the turn (also one that waits for a person, which
// has no request to abort), then the client drops its request.
$('#stop').onclick = async () => {
  $('#stop').disabled = true;
  const last = chat.messages.at(-1);
  if (last?.role === 'assistant') stopped.add(last.id);
  try {
    await fetch(`/api/chat/${encodeURIComponent(chat.id)}/stop`, { method: 'POST' });
  } finally {
    await chat.stop();
    scheduleRender();
  }
};

// load shows the chat's messages as the server keeps them, and follows
// its turn when one is in progress (a reload mid-answer, or while it waits
// in this server for a person).
async function load() {
  try {
    const res = await fetch(`/api/chat/${encodeURIComponent(chat.id)}/messages`);
    if (!res.ok) throw new Error(`loading the chat: ${(await res.json().catch(() => ({}))).error ?? res.status}`);
    const messages = await res.json();
    if (chat.messages.length === 0) chat.messages = messages;
    loaded = true;
    render();
    await chat.resumeStream();
  } catch (e) {
    $('#status').textContent = `error: ${e.message}`;
    return;
  }
  document.body.dataset.chat = chat.id;
  render();
}

render();
load();
