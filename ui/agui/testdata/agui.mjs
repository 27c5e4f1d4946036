// Drives the Go AG-UI handler with the real client (@ag-ui/client's
// HttpAgent) through one scenario, and checks every event the server wrote
// twice: inside the client (its schema enforcement and verifyEvents), and
// from the raw bytes of each response (parsed by this script, each event
// parsed with @ag-ui/core's EventSchemas, the whole run through
// verifyEvents again). Prints a compact trace of the event types, one line
// per run, and the facts the Go test asserts on.
//
//   node agui.mjs <url> <scenario> <threadId> [--expect-invalid]
//
// With --expect-invalid the script succeeds only when validation fails
// (the Go test that drops or reorders an event).
import { HttpAgent, verifyEvents, buildResumeArray, getRunOutcome } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { from, lastValueFrom, toArray } from "rxjs";

const [url, scenario, threadId, ...flags] = process.argv.slice(2);
const expectInvalid = flags.includes("--expect-invalid");

const warnings = [];
console.warn = (...a) => warnings.push(a.map(String).join(" "));

const messages = {
  hello: "hello",
  approve: "what is the weather in Lima",
  "approve-streamed": "what is the weather in Lima",
  reject: "what is the weather in Lima",
  two: "weather for two cities",
  abort: "run the slow task",
  form: "ask me which city",
  card: "show me a card",
  research: "research the weather",
  numbers: 'order {"price":2.50,"qty":20.0,"n":1e3,"z":-0,"big":12345678901234567890}',
  moveon: "what is the weather in Lima",
  "moveon-form": "ask me which city",
  stale: "weather for two cities",
  "stale-cancel": "weather for two cities",
};

const raw = []; // per request: a promise of the response's text
const newAgent = () =>
  new HttpAgent({
    url,
    threadId,
    headers: { "X-User": "alice" },
    fetch: async (u, init) => {
      const res = await fetch(u, init);
      raw.push(res.clone().text().catch((e) => ({ aborted: String(e) })));
      return res;
    },
  });
const agent = newAgent();

let runs = 0;
const seen = []; // per run: the events the client applied
const subscriber = {
  onEvent({ event }) {
    seen[seen.length - 1].push(event);
    if (scenario === "abort" && event.type === "CUSTOM" && event.name === "planround.tool_progress") {
      setTimeout(() => agent.abortRun(), 10);
    }
  },
};

async function run(input, ag = agent) {
  runs++;
  seen.push([]);
  return ag.runAgent({ runId: `${threadId}-run${runs}`, ...input }, subscriber);
}

// answerAll answers every interrupt ag waits for with the same response.
function answerAll(ag, response) {
  const responses = {};
  for (const it of ag.pendingInterrupts) responses[it.id] = response;
  return run({ resume: buildResumeArray(ag.pendingInterrupts, responses) }, ag);
}

function label(e) {
  switch (e.type) {
    case "CUSTOM":
      return `CUSTOM(${e.name})`;
    case "RUN_FINISHED":
      return `RUN_FINISHED(${getRunOutcome(e)?.type ?? "success"})`;
    case "RUN_ERROR":
      return `RUN_ERROR(${e.code ?? ""})`;
    case "TOOL_CALL_START":
      return `TOOL_CALL_START(${e.toolCallName})`;
    case "ACTIVITY_SNAPSHOT":
      return `ACTIVITY_SNAPSHOT(${e.activityType})`;
    case "SUBAGENT_FINISHED":
      return `SUBAGENT_FINISHED(${e.outcome?.type ?? ""})`;
    default:
      return e.subagentRunId ? `${e.type}@sub` : e.type;
  }
}

// compact collapses repeats: A A A -> A*3.
function compact(events) {
  const out = [];
  for (const e of events) {
    const l = label(e);
    const last = out[out.length - 1];
    if (last && last.l === l) last.n++;
    else out.push({ l, n: 1 });
  }
  return out.map(({ l, n }) => (n > 1 ? `${l}*${n}` : l)).join(" ");
}

// checkRaw parses one response body as server-sent events, validates each
// event with the schemas and the run with verifyEvents.
async function checkRaw(text, i) {
  if (typeof text !== "string") return `run${i + 1}: body cut (${text.aborted})`;
  if (!text.endsWith("\n\n")) throw new Error(`run${i + 1}: the body does not end with an event`);
  const events = text
    .split("\n\n")
    .filter((b) => b !== "")
    .map((block) => {
      if (!block.startsWith("data: ") || block.includes("\n")) throw new Error(`run${i + 1}: not one data line: ${JSON.stringify(block)}`);
      const ev = JSON.parse(block.slice(6));
      const r = EventSchemas.safeParse(ev);
      if (!r.success) throw new Error(`run${i + 1}: ${ev.type} fails the schema: ${r.error.message}`);
      return ev;
    });
  await lastValueFrom(from(events).pipe(verifyEvents(), toArray()));
  return `run${i + 1}: ${events.length} events valid`;
}

// moveOn: the person writes a new message instead of answering; the
// client must address the interrupt, and cancels it in the same run.
async function moveOn() {
  agent.addMessage({ id: `${threadId}-u1`, role: "user", content: messages[scenario] });
  await run({});
  for (const it of agent.pendingInterrupts) console.log(`INTERRUPT ${JSON.stringify(it)}`);
  agent.addMessage({ id: `${threadId}-u2`, role: "user", content: "hello" });
  await answerAll(agent, { status: "cancelled" });
}

// stale: a second tab (a client with the first one's messages and
// interrupts) answers call_1 after the first tab did, and is shown call_2,
// whose events it never got; it answers that (approves it, or cancels it).
async function stale(cancel) {
  agent.addMessage({ id: `${threadId}-u1`, role: "user", content: messages[scenario] });
  await run({});
  const second = newAgent();
  second.messages = structuredClone(agent.messages);
  second.pendingInterrupts = structuredClone(agent.pendingInterrupts);
  await answerAll(agent, { status: "resolved", payload: { approved: true } });
  await answerAll(second, { status: "resolved", payload: { approved: true } });
  for (const it of second.pendingInterrupts) console.log(`STALE ${JSON.stringify(it)}`);
  await answerAll(second, cancel ? { status: "cancelled" } : { status: "resolved", payload: { approved: true } });
  for (const m of second.messages) {
    const calls = (m.toolCalls ?? []).map((c) => `${c.id}:${c.function.name}${c.function.arguments}`).join(",");
    if (calls) console.log(`SECOND ${m.role} ${m.id} [${calls}]`);
  }
}

async function scenarioSteps() {
  if (scenario.startsWith("moveon")) return moveOn();
  if (scenario.startsWith("stale")) return stale(scenario === "stale-cancel");
  agent.addMessage({ id: `${threadId}-u1`, role: "user", content: messages[scenario] });
  try {
    await run({});
  } catch (e) {
    if (scenario !== "abort") throw e;
    console.log(`ABORT ${e?.name ?? e}`);
  }
  const answer = {
    approve: { approved: true },
    "approve-streamed": { approved: true },
    numbers: { approved: true },
    reject: { approved: false, reason: "not today" },
    two: { approved: true },
    research: { approved: true },
    form: { city: "Lima" },
  }[scenario];
  while (answer && agent.pendingInterrupts.length > 0 && runs < 5) {
    for (const it of agent.pendingInterrupts) console.log(`INTERRUPT ${JSON.stringify(it)}`);
    const responses = {};
    for (const it of agent.pendingInterrupts) responses[it.id] = { status: "resolved", payload: answer };
    await run({ resume: buildResumeArray(agent.pendingInterrupts, responses) });
  }
}

// reconnect shows that the 1.0 HttpAgent cannot rejoin a run in progress:
// its connect is not implemented, so connectAgent sends no request and
// yields no event.
async function reconnect() {
  seen.push([]);
  await agent.connectAgent({ runId: `${threadId}-connect` }, subscriber);
  console.log(`CONNECT requests=${raw.length} events=${seen[0].length}`);
}

let invalid = "";
try {
  if (scenario === "reconnect") await reconnect();
  else await scenarioSteps();
} catch (e) {
  invalid = `client: ${e?.message ?? e}`;
}
for (let i = 0; i < raw.length; i++) {
  try {
    console.log(`RAW ${await checkRaw(await raw[i], i)}`);
  } catch (e) {
    invalid ||= `raw: ${e?.message ?? e}`;
  }
}
const agui = warnings.filter((w) => w.includes("[ag-ui]"));
if (agui.length > 0) invalid ||= `client warnings: ${agui.join(" | ")}`;

seen.forEach((events, i) => console.log(`TRACE run${i + 1}: ${compact(events)}`));
for (const m of agent.messages) {
  const calls = (m.toolCalls ?? []).map((c) => `${c.id}:${c.function.name}${c.function.arguments}`).join(",");
  const content = typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "");
  console.log(`MESSAGE ${m.role} ${m.id} ${calls ? `[${calls}] ` : ""}${content}`);
}
if (invalid) {
  console.log(`INVALID: ${invalid}`);
  process.exit(expectInvalid ? 0 : 1);
}
if (expectInvalid) {
  console.log("VALID, but an invalid stream was expected");
  process.exit(1);
}
console.log("OK");
