// Drives the aisdk handler with the ai package's own client: AbstractChat
// with DefaultChatTransport (what useChat builds on), through the scenarios
// named on the command line. Every chunk of every response is also
// validated with the package's uiMessageChunkSchema, and fed to
// readUIMessageStream with terminateOnError. Prints one JSON line per
// scenario: {scenario, ok, error, trace, text, parts, metadata}.
//
// usage: node conformance.mjs BASE_URL SCENARIO...
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
  uiMessageChunkSchema,
} from 'ai';
import { safeValidateTypes } from '@ai-sdk/provider-utils';

const [base, ...scenarios] = process.argv.slice(2);

class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = m => { this.messages = this.messages.concat(m); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; };
  snapshot = v => structuredClone(v);
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State() }); }
}

// checkedFetch records the chunk types of every response and checks each
// chunk against the schema and the stream reader.
function checkedFetch(trace, problems) {
  return async (url, init) => {
    const res = await fetch(url, init);
    if (!res.ok || res.status === 204 || !res.body) return res;
    const [mine, theirs] = res.body.tee();
    // A response that continues the client's last assistant message is
    // read on top of it, as the chat does.
    let message;
    if (init?.body) {
      const last = JSON.parse(init.body).messages?.at(-1);
      if (last?.role === 'assistant') message = structuredClone(last);
    }
    check(mine, trace, problems, message);
    return new Response(theirs, { status: res.status, headers: res.headers });
  };
}

async function check(body, trace, problems, message) {
  const chunks = [];
  let rest = '', aborted = false;
  const decoder = new TextDecoder();
  try {
    for await (const bytes of body) {
      rest += decoder.decode(bytes, { stream: true });
      let i;
      while ((i = rest.indexOf('\n\n')) >= 0) {
        const event = rest.slice(0, i);
        rest = rest.slice(i + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data: ')) continue;
          const data = line.slice(6);
          if (data === '[DONE]') { trace.push('[DONE]'); continue; }
          const value = JSON.parse(data);
          const v = await safeValidateTypes({ value, schema: uiMessageChunkSchema });
          if (!v.success) problems.push(`invalid chunk ${data}: ${v.error.message}`);
          trace.push(value.type);
          chunks.push(value);
        }
      }
    }
  } catch (e) {
    aborted = true; // the client stopped reading (a stop)
    if (e.name !== 'AbortError') problems.push(`reading: ${e.message}`);
  }
  order(chunks, message, problems, aborted);
  // The reader of the ai package, strict.
  const stream = new ReadableStream({ start(c) { for (const x of chunks) c.enqueue(x); c.close(); } });
  try {
    for await (const _ of readUIMessageStream({ message, stream, terminateOnError: true, onError: e => problems.push(`readUIMessageStream: ${e.message}`) })) { /* snapshots */ }
  } catch (e) {
    problems.push(`readUIMessageStream: ${e.message}`);
  }
}

// order checks what the client tolerates but the handler promises: a
// stream begins with start and ends with finish; every part is opened
// before it is used, and opened once; a tool part begins with
// tool-input-start, and its input comes before its approval request and
// its outcome (unless the client's message, continued, has the call).
function order(chunks, message, problems, aborted) {
  const known = new Set((message?.parts ?? []).filter(p => p.toolCallId).map(p => p.toolCallId));
  const started = new Set(), input = new Set(), open = new Set();
  const bad = msg => problems.push(`order: ${msg}`);
  if (chunks.length === 0) return bad('an empty stream');
  if (chunks[0].type !== 'start') bad(`the stream begins with ${chunks[0].type}`);
  if (!aborted && chunks.at(-1).type !== 'finish') bad(`the stream ends with ${chunks.at(-1).type}`);
  for (const c of chunks) {
    const id = c.toolCallId;
    switch (c.type) {
      case 'tool-input-start':
        if (started.has(id) || known.has(id)) bad(`${id} started twice`);
        started.add(id);
        break;
      case 'tool-input-delta':
        if (!started.has(id)) bad(`input delta of ${id} before its start`);
        break;
      case 'tool-input-available':
        if (!started.has(id)) bad(`input of ${id} before its start`);
        input.add(id);
        break;
      case 'tool-approval-request':
      case 'tool-output-available':
      case 'tool-output-error':
      case 'tool-output-denied':
        if (!input.has(id) && !known.has(id)) bad(`${c.type} of ${id} before its input`);
        break;
      case 'text-start':
      case 'reasoning-start':
        if (open.has(c.id)) bad(`${c.id} opened twice`);
        open.add(c.id);
        break;
      case 'text-delta':
      case 'reasoning-delta':
        if (!open.has(c.id)) bad(`${c.type} of ${c.id} not open`);
        break;
      case 'text-end':
      case 'reasoning-end':
        if (!open.delete(c.id)) bad(`${c.type} of ${c.id} not open`);
        break;
    }
  }
  if (!aborted && open.size > 0) bad(`parts left open: ${[...open]}`);
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

async function until(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = fn();
    if (v) return v;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

function lastAssistant(chat) {
  return chat.messages.findLast(m => m.role === 'assistant');
}
function textOf(m) {
  return m ? m.parts.filter(p => p.type === 'text').map(p => p.text).join('|') : '';
}
function toolPart(chat, id) {
  const m = lastAssistant(chat);
  return m?.parts.find(p => (p.type === 'dynamic-tool' || p.type.startsWith('tool-')) && (id === undefined || p.toolCallId === id));
}
function dataPart(chat, type) {
  return lastAssistant(chat)?.parts.find(p => p.type === type);
}
const ready = chat => chat.status === 'ready' || chat.status === 'error';

// Any approval answered and none left to answer: also when a call above
// (a sub-agent's) still runs.
const approvalsAnswered = ({ messages }) => {
  const m = messages.at(-1);
  return m?.role === 'assistant' && m.parts.some(p => p.state === 'approval-responded') && !m.parts.some(p => p.state === 'approval-requested');
};

function newChat(id, trace, problems, opts = {}) {
  return new Chat({
    id,
    transport: new DefaultChatTransport({ api: opts.api ?? `${base}/api/chat`, fetch: checkedFetch(trace, problems), headers: opts.headers }),
    sendAutomaticallyWhen: opts.predicate ?? lastAssistantMessageIsCompleteWithApprovalResponses,
    onError: e => problems.push(`chat error: ${e.message}`),
  });
}

const run = {
  async text(chat) {
    await chat.sendMessage({ text: 'hello' });
    await until('the answer', () => ready(chat));
  },
  async approve(chat) {
    await chat.sendMessage({ text: 'what is the weather in Lima' });
    const p = await until('an approval request', () => toolPart(chat)?.state === 'approval-requested' && toolPart(chat));
    await chat.addToolApprovalResponse({ id: p.approval.id, approved: true });
    await until('the result', () => ready(chat) && toolPart(chat)?.state === 'output-available');
    await until('the answer', () => ready(chat) && textOf(lastAssistant(chat)).includes('Done'));
  },
  async reject(chat) {
    await chat.sendMessage({ text: 'what is the weather in Lima' });
    const p = await until('an approval request', () => toolPart(chat)?.state === 'approval-requested' && toolPart(chat));
    await chat.addToolApprovalResponse({ id: p.approval.id, approved: false, reason: 'not now' });
    await until('the denial', () => ready(chat) && toolPart(chat)?.state === 'output-denied' && lastAssistant(chat).metadata?.planround?.status !== 'waiting');
  },
  async two(chat) {
    await chat.sendMessage({ text: 'weather for two cities' });
    for (const id of ['call_1', 'call_2']) {
      const p = await until(`the approval of ${id}`, () => toolPart(chat, id)?.state === 'approval-requested' && ready(chat) && toolPart(chat, id));
      await chat.addToolApprovalResponse({ id: p.approval.id, approved: true });
    }
    await until('the answer', () => ready(chat) && textOf(lastAssistant(chat)).includes('Done'));
  },
  async interrupt(chat) {
    chat.sendMessage({ text: 'run the slow task' });
    await until('the running call', () => toolPart(chat)?.state === 'input-available');
    await chat.stop();
  },
  async stop(chat) {
    chat.sendMessage({ text: 'run the slow task' });
    await until('the running call', () => toolPart(chat)?.state === 'input-available');
    const res = await fetch(`${base}/api/chat/${encodeURIComponent(chat.id)}/stop`, { method: 'POST' });
    if (!res.ok) throw new Error(`stop: ${res.status}`);
    await until('the end', () => ready(chat));
  },
  async form(chat) {
    await chat.sendMessage({ text: 'ask me which city' });
    const f = await until('the form', () => ready(chat) && dataPart(chat, 'data-planround-form'));
    await chat.sendMessage(undefined, { body: { planround: { form: { id: f.data.payload.form_id, answers: { city: ['Quito'] } } } } });
    await until('the answer', () => ready(chat) && textOf(lastAssistant(chat)).includes('Done'));
  },
  async card(chat) {
    await chat.sendMessage({ text: 'show me a card' });
    await until('the answer', () => ready(chat) && textOf(lastAssistant(chat)).includes('Done'));
    if (!dataPart(chat, 'data-planround-card')) throw new Error('no card part');
  },
  // order=<arguments>: place_order with those arguments, approved. The
  // client sends the input back as it read it (JSON.parse, then
  // JSON.stringify of the request body).
  async order(chat, args) {
    await chat.sendMessage({ text: `order ${args}` });
    const p = await until('an approval request', () => ready(chat) && toolPart(chat)?.state === 'approval-requested' && toolPart(chat));
    await chat.addToolApprovalResponse({ id: p.approval.id, approved: true });
    await until('the answer', () => ready(chat) && textOf(lastAssistant(chat)).includes('Done: ordered'));
  },
  // order-deny=<arguments>: the same, denied.
  async 'order-deny'(chat, args) {
    await chat.sendMessage({ text: `order ${args}` });
    const p = await until('an approval request', () => ready(chat) && toolPart(chat)?.state === 'approval-requested' && toolPart(chat));
    await chat.addToolApprovalResponse({ id: p.approval.id, approved: false, reason: 'no' });
    await until('the denial', () => ready(chat) && toolPart(chat)?.state === 'output-denied' && lastAssistant(chat).metadata?.planround?.status !== 'waiting');
  },
  async subagent(chat) {
    await chat.sendMessage({ text: 'research the weather' });
    const p = await until('the nested approval', () => ready(chat) && toolPart(chat, 'call_r/call_q')?.state === 'approval-requested' && toolPart(chat, 'call_r/call_q'));
    await chat.addToolApprovalResponse({ id: p.approval.id, approved: true });
    await until('the answer', () => ready(chat) && textOf(lastAssistant(chat)).includes('Done'));
  },
};

// reconnect: a first client goes away mid-turn (the handler keeps the turn
// running), a second one with the same messages resumes the stream.
async function reconnect(id, trace, problems) {
  const api = `${base}/keep/api/chat`;
  const a = newChat(id, trace, problems, { api });
  a.sendMessage({ text: 'tell me something long' });
  await until('a few words', () => textOf(lastAssistant(a)).includes('word3'));
  await a.stop();
  const b = newChat(id, trace, problems, { api });
  b.messages = structuredClone(a.messages);
  await b.resumeStream();
  await until('the whole answer', () => ready(b) && textOf(lastAssistant(b)).includes('word39'));
  return b;
}

// load returns the chat's messages as GET {api}/{id}/messages answers
// them, with its status.
async function load(id, api = `${base}/api/chat`) {
  const res = await fetch(`${api}/${encodeURIComponent(id)}/messages`);
  if (!res.ok) throw new Error(`loading the messages: ${res.status} ${await res.text()}`);
  return res.json();
}

// reload: a page asks for an approval and goes away (reloaded); a new
// client loads the chat's messages, resumes the turn (resumeStream: the
// turn waits in this process), sees the approval, approves, gets the
// answer; a third load shows the whole conversation, the call done.
async function reload(id, trace, problems, out) {
  const api = `${base}/keep/api/chat`;
  const a = newChat(id, trace, problems, { api });
  await a.sendMessage({ text: 'what is the weather in Lima' });
  await until('an approval request', () => ready(a) && toolPart(a)?.state === 'approval-requested');
  const b = newChat(id, trace, problems, { api });
  b.messages = await load(id, api);
  out.loaded = b.messages.map(m => m.role).join(',');
  await b.resumeStream();
  const p = await until('the approval again', () => ready(b) && toolPart(b)?.state === 'approval-requested' && toolPart(b));
  await b.addToolApprovalResponse({ id: p.approval.id, approved: true });
  await until('the answer', () => ready(b) && textOf(lastAssistant(b)).includes('Done'));
  const c = newChat(id, trace, problems, { api });
  c.messages = await load(id, api);
  out.reloaded = c.messages.map(m => m.role).join(',');
  await c.resumeStream();
  // The conversation goes on after the reload.
  await c.sendMessage({ text: 'hello' });
  await until('the next answer', () => ready(c) && textOf(lastAssistant(c)).includes('Hello there'));
  out.history = (await load(id, api)).map(m => ({ role: m.role, parts: m.parts }));
  return c;
}

// secondTab: two tabs of one chat (two clients with the same chat id and
// messages) are shown the approval; the first approves, and while its
// answer streams the second answers too (approving, or with deny set,
// denying). The second tab's message must end as the first's: the
// decision taken, the call's result, the answer once.
async function secondTab(id, trace, problems, deny, out) {
  const a = newChat(id, trace, problems);
  await a.sendMessage({ text: 'what is the weather in Lima, answered slowly' });
  const p = await until('an approval request', () => ready(a) && toolPart(a)?.state === 'approval-requested' && toolPart(a));
  const b = newChat(id, trace, problems);
  b.messages = structuredClone(a.messages);
  a.addToolApprovalResponse({ id: p.approval.id, approved: true });
  await until('the first tab\'s answer streaming', () => textOf(lastAssistant(a)).includes('word2 '));
  await b.addToolApprovalResponse({ id: p.approval.id, approved: !deny, reason: deny ? 'no' : undefined });
  await until('the second tab\'s answer', () => ready(b) && textOf(lastAssistant(b)).includes('word39'));
  await until('the first tab\'s answer', () => ready(a) && textOf(lastAssistant(a)).includes('word39'));
  out.other = textOf(lastAssistant(a));
  out.approval = toolPart(b)?.approval;
  return b;
}

for (const [i, scenario] of scenarios.entries()) {
  const trace = [], problems = [], out = {};
  const [name, arg] = scenario.split(/=(.*)/s);
  const id = `${name}-${i}-${process.pid}-${Date.now()}`;
  let chat, error;
  try {
    if (name === 'reconnect') {
      chat = await reconnect(id, trace, problems);
    } else if (name === 'reload') {
      chat = await reload(id, trace, problems, out);
    } else if (name === 'second-tab' || name === 'second-tab-deny') {
      chat = await secondTab(id, trace, problems, name === 'second-tab-deny', out);
    } else {
      chat = newChat(id, trace, problems, { predicate: name === 'subagent' ? approvalsAnswered : undefined });
      await run[name](chat, arg);
    }
    await sleep(50); // the last checks of a response
  } catch (e) {
    error = e.message;
  }
  if (chat?.status === 'error') problems.push(`chat status error: ${chat.error?.message}`);
  const m = chat && lastAssistant(chat);
  console.log(JSON.stringify({
    scenario, id, ok: !error && problems.length === 0, error, problems, trace,
    text: textOf(m), metadata: m?.metadata,
    parts: m?.parts.map(p => ({ type: p.type, state: p.state, toolCallId: p.toolCallId, input: p.input, output: p.output, data: p.data, approval: p.approval })),
    messages: chat?.messages.length,
    ...out,
  }));
}
