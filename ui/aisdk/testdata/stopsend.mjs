// Stop, then send at once, with the ai package's own client (AbstractChat
// with DefaultChatTransport, what useChat builds on), ROUNDS times: start
// the slow task, wait until its call runs, stop the turn (chat.stop(), which
// drops the stream; or a POST to the handler's stop path, acknowledged,
// then chat.stop() to leave the stream), and send "hello" at once. Prints one JSON line: {rounds, refused, errors}.
//
// usage: node stopsend.mjs BASE_URL stop|endpoint ROUNDS
import { AbstractChat, DefaultChatTransport } from 'ai';

const [base, how, rounds] = process.argv.slice(2);

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

const sleep = ms => new Promise(r => setTimeout(r, ms));

async function until(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (fn()) return;
    await sleep(5);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const lastAssistant = chat => chat.messages.findLast(m => m.role === 'assistant');
const running = chat => lastAssistant(chat)?.parts.some(p => p.type === 'dynamic-tool' && p.state === 'input-available');
const textOf = m => (m ? m.parts.filter(p => p.type === 'text').map(p => p.text).join('') : '');

const errors = [];
let refused = 0;
const chat = new Chat({
  id: `stopsend-${how}-${process.pid}-${Date.now()}`,
  transport: new DefaultChatTransport({ api: `${base}/api/chat` }),
  onError: e => {
    if (String(e.message).includes('already active')) refused++;
    else errors.push(e.message);
  },
});

for (let i = 0; i < Number(rounds); i++) {
  try {
    const slow = chat.sendMessage({ text: 'run the slow task' });
    await until('the running call', () => running(chat));
    if (how === 'stop') {
      await chat.stop();
    } else {
      const res = await fetch(`${base}/api/chat/${encodeURIComponent(chat.id)}/stop`, { method: 'POST' });
      const out = await res.json();
      if (!res.ok || !out.was_active) errors.push(`round ${i}: stop answered ${res.status} ${JSON.stringify(out)}`);
      // The page leaves the stopped stream as soon as the stop is
      // acknowledged.
      await chat.stop();
    }
    await slow.catch(() => {});
    const before = refused;
    await chat.sendMessage({ text: 'hello' });
    await until('the answer', () => chat.status === 'ready' || chat.status === 'error');
    if (refused === before && !textOf(lastAssistant(chat)).includes('Hello')) errors.push(`round ${i}: no answer (${chat.status})`);
  } catch (e) {
    errors.push(`round ${i}: ${e.message}`);
  }
}
console.log(JSON.stringify({ rounds: Number(rounds), refused, errors }));
