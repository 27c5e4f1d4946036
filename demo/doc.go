// Package demo is planround's built-in demo: a deterministic model that
// speaks the planning-round protocol over a [scripted.Server], and a few
// tools to call, so the examples run on a fresh machine with no API key.
//
// # The model
//
// [Respond] answers a chat-completions request without looking at prompt
// wording; it only reads the request's shape:
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
//     quotes this turn's results.
//
// Text streams in deltas of a few characters, tags split across deltas the
// way real models split them, with a small delay between deltas
// ([DefaultDelay]) so a person sees it stream; a [Model] with a zero Delay
// streams at once, for tests.
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
// size does not grow with the message. [NewServer] serves it on 127.0.0.1
// to the process that started it only (a random API key), keeping none of
// the requests it answered.
//
// # The tools
//
// [GetWeather] (fake, deterministic), [GetTime] (real clock, any IANA
// zone), [RunCommand] (a real sh -c command in its own process group, its
// output streamed line by line, needs approval) and [ShowCard] (a silent
// display that skips approval). [Tools] returns all four.
package demo
