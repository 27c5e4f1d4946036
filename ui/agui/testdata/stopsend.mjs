// Abort, then run again at once, with the real client (@ag-ui/client's
// HttpAgent), ROUNDS times: a run of the slow task is aborted (abortRun)
// once the task runs, and the next run, with a new user message, starts at
// once. Prints one JSON line: {rounds, refused, errors}.
//
//   node stopsend.mjs <url> <threadId> <rounds>
import { HttpAgent } from "@ag-ui/client";

const [url, threadId, rounds] = process.argv.slice(2);

const agent = new HttpAgent({ url, threadId, headers: { "X-User": "alice" } });
const errors = [];
let refused = 0;
let abortNow = false;
const subscriber = {
  onEvent({ event }) {
    if (abortNow && event.type === "CUSTOM" && event.name === "planround.tool_progress") {
      abortNow = false;
      agent.abortRun();
    }
  },
};

for (let i = 0; i < Number(rounds); i++) {
  agent.addMessage({ id: `${threadId}-slow-${i}`, role: "user", content: "run the slow task" });
  abortNow = true;
  try {
    await agent.runAgent({ runId: `${threadId}-slow-${i}` }, subscriber);
  } catch (e) {
    if (e?.name !== "AbortError" && !String(e).includes("abort")) errors.push(`round ${i}: slow run: ${e?.message ?? e}`);
  }
  if (abortNow) errors.push(`round ${i}: the slow run ended before the task ran`);
  agent.addMessage({ id: `${threadId}-hello-${i}`, role: "user", content: "hello" });
  try {
    const result = await agent.runAgent({ runId: `${threadId}-hello-${i}` }, {});
    const last = agent.messages.at(-1);
    if (!String(last?.content ?? "").includes("Hello")) errors.push(`round ${i}: no answer: ${JSON.stringify(last)} ${JSON.stringify(result?.result ?? null)}`);
  } catch (e) {
    const msg = String(e?.message ?? e);
    if (msg.includes("409")) refused++;
    else errors.push(`round ${i}: ${msg}`);
  }
}
console.log(JSON.stringify({ rounds: Number(rounds), refused, errors }));
