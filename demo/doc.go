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
// request's shape:
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
//   - a request that does not ask for a stream (such as a summary): a
//     short summary of the user's messages.
//
// Text streams in deltas of a few characters, tags split across deltas the
// way real models split them, with [Model.Delay] between deltas
// ([DefaultDelay] lets a person see it stream; zero streams at once, for
// tests).
//
// What the user asks for is read from words: weather or forecast
// (get_weather, city after "in", default Paris), time or clock (get_time,
// an IANA zone or a known city, default UTC), run, command, shell or ls
// (run_command, the command in backticks or after "run", default ls), card
// (show_card; "show" alone also asks for a card when nothing else was
// asked). A message containing the word "say" gets a reply that starts
// with <voice>.
//
// The model reads at most the first few kilobytes of the latest user
// message and quotes a few hundred characters of it at most, so a reply's
// size does not grow with the message, and it keeps nothing from one
// request to the next.
//
// # The tools
//
// [GetWeather] (fake, deterministic), [GetTime] (real clock, any IANA
// zone), [RunCommand] (a real sh -c command in its own process group, its
// output streamed line by line, needs approval) and [ShowCard] (a silent
// display that skips approval, [interact.ShowCard]: its card comes as a side
// message). [Tools] returns all four.
package demo
