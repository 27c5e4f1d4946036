// Package demo is planround's built-in demo: a deterministic model that
// speaks the planning-round protocol, and a few tools for it to call, so
// that a host runs on a fresh machine with no API key and no network. The
// web chat and the CLI under examples/ use it when no model is configured.
//
// # The model
//
// A [Model] is an [http.RoundTripper] that answers chat-completions
// requests in process: an agent configured with [BaseURL] and
// [Model.Client] talks to it without a listening port, so no other process
// can reach it. [Model.Respond] gives the same answers as
// [agenttest.Response] values, for a test's own server.
//
// The model answers without looking at prompt wording; it only reads the
// request's shape (and the names of its skills block, see below):
//
//   - no tools, and the last non-system message is not "[continue]": a
//     planning reply, a short sentence ending in <need_tool> when the
//     latest user message asks for something a demo tool does, else
//     <no_tool>;
//   - no tools, and the last non-system message is "[continue]": the full
//     answer in words;
//   - tools, and no tool results yet in this turn: a short text and the
//     tool calls the user asked for, among the tools the request offers,
//     several at once when asked for several things;
//   - tools, and the last message is a tool result: a final answer that
//     quotes this turn's results;
//   - the agent's summary request (agent.SummaryPrompt and a transcript),
//     or any request that does not ask for a stream: a short summary of
//     the user's messages.
//
// Text streams in deltas of a few characters, tags split across deltas the
// way real models split them, with [Model.Delay] between deltas
// ([DefaultDelay] lets a person see it stream; zero streams at once, for
// tests).
//
// What the user asks for is read from words, among the tools the request
// offers:
//
//   - research, researcher, delegate, sub-agent or subagent: the
//     [Researcher] sub-agent, named "researcher", with the task "Find the
//     weather in ... and the time in ..." made of the weather and time asked
//     for (which it then looks up itself, instead of the two calls below), or
//     of Paris and Europe/Paris when none were; the nested demo model reads
//     that task with the words below;
//   - weather, forecast or temperature: get_weather, the city after "in"
//     (default Paris);
//   - time, clock or timezone: get_time, an IANA zone or a known city
//     (default UTC);
//   - run, execute, command, shell or ls: run_command, the command in
//     backticks or after "run" (default ls);
//   - skill or skills: get_skill (package skills) with the skill of the
//     request's skills block (the list after [skills.Intro], its first 100
//     names) whose name the message holds, else the first one listed;
//     without a skills block, a name the message gives in backticks, as
//     "the pdf skill" or as "skill named pdf";
//   - "ask me", question(s) or form(s): ask_user_question (package
//     interact) with a form titled "A few questions": a single choice
//     (colour: red, green or blue), a multiple choice (days: Monday,
//     Wednesday, Friday) and a free text question (note);
//   - card or cards: show_card, titled after "about", "titled", "called"
//     or "for"; "show" alone also asks for a card when nothing else was
//     asked.
//
// Several at once make several calls, in that order. The final answer
// quotes each call's result (a form's answers, a skill's text, the
// researcher's answer), a few lines of each. A message containing the word
// "say" gets a reply that starts with <voice>.
//
// The model reads at most the first few kilobytes of the latest user
// message and quotes a few hundred characters of it at most, so a reply's
// size does not grow with the message, and it keeps nothing from one
// request to the next.
//
// # The tools
//
// [GetWeather] (fake, deterministic), [GetTime] (real clock, any IANA
// zone), [RunCommand] (a real sh -c command in its own process group, and
// on Linux in its own cgroup where it can, its output streamed line by
// line, needs approval) and [ShowCard] (a silent
// display that skips approval, [interact.ShowCard]: its card comes as a side
// message). [Tools] returns all four. [Researcher] builds the researcher
// sub-agent from a host's Config; ask_user_question and get_skill come
// from their own packages (interact, agent/skills).
package demo
