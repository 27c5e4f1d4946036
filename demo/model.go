package demo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/interact"
)

// DefaultDelay is a pause between streamed deltas short enough not to
// slow anyone down, but long enough for a person to see text stream.
const DefaultDelay = 15 * time.Millisecond

// BaseURL is a base URL for an agent that talks to the demo model through
// [Model.Client]. Its host never resolves (.invalid), so a request that
// misses the model's client fails rather than reaching a real provider.
const BaseURL = "http://planround-demo.invalid/v1"

// ModelName is the model name the demo model reports in its replies.
const ModelName = "planround-demo"

// continueMarker is the transition user message of the planning protocol.
const continueMarker = "[continue]"

// Bounds on what the model reads and quotes, so that a reply's size and
// the memory it takes do not grow with the user's message.
const (
	maxUserText = 4 << 10 // bytes of the latest user message the model reads
	maxQuote    = 200     // runes of the user's words quoted in a reply
	maxName     = 60      // runes of a name (city, zone, command, title) in a plan
	maxTopics   = 20      // user messages a summary names
	maxArgFrags = 32      // deltas of one call's arguments, at most about
	maxSkills   = 100     // skills of the request's skills block the model reads
)

// Names of the tools the model calls besides the demo tools, when the
// request offers them (see the package documentation).
const (
	// ResearcherName is the name of the sub-agent [Researcher] returns.
	ResearcherName = "researcher"
	// AskToolName is the name of interact's ask_user_question tool.
	AskToolName = "ask_user_question"
	// SkillToolName is the name of the get_skill tool of package skills.
	SkillToolName = skills.ToolName
)

// Model is the deterministic demo model. Its zero value streams without
// delay between deltas. A Model is an [http.RoundTripper]: it answers in
// process, with no listening port, so only the client it is given to can
// use it. It keeps nothing from the requests it answered, and is safe for
// concurrent use.
type Model struct {
	// Delay is the pause between streamed deltas.
	Delay time.Duration
}

// Respond answers req following the rules in the package documentation.
func (m Model) Respond(req *agenttest.Request) agenttest.Response {
	t := readTurn(req)
	b := agenttest.Reply().Model(ModelName)
	var out string
	finish := "stop"
	switch {
	case !req.Stream:
		out = summary(req)
		b.Text(out)
	case isSummaryRequest(req):
		out = summary(req)
		b.Text(split(out)...)
	case !req.HasTools() && t.last.Role == "user" && isContinue(t.last.Content):
		out = answer(t.user)
		b.Text(split(out)...)
	case !req.HasTools():
		out = plan(t.user, offer{skills: skillsIn(req)})
		b.Text(split(out)...)
	case t.last.Role == "tool":
		out = final(t)
		b.Text(split(out)...)
	default:
		var calls []request
		for _, c := range wants(t.user, offer{has: req.HasTool, skills: skillsIn(req)}) {
			if req.HasTool(c.tool) {
				calls = append(calls, c)
			}
		}
		if len(calls) == 0 {
			out = "I have no tool for that here, so I'll answer in words. " + answer(t.user)
			b.Text(split(out)...)
			break
		}
		names := make([]string, len(calls))
		for i, c := range calls {
			names[i] = c.tool
		}
		b.Reasoning(split("The user asked for something " + strings.Join(names, " and ") + " can do, and the request offers it, so I call it now.")...)
		out = "Let me call " + strings.Join(names, " and ") + "."
		b.Text(split(out)...)
		for i, c := range calls {
			args, _ := json.Marshal(c.args) // strings, in maps and structs: cannot fail
			out += string(args)
			b.Call(i, fmt.Sprintf("call_demo_%d_%d", len(req.Messages), i+1), c.tool, splitN(string(args), max(7, len(args)/maxArgFrags+1))...)
		}
		finish = "tool_calls"
	}
	b.Usage(int64(promptSize(req)/4+1), int64(len(out)/4+1))
	return b.Finish(finish).Delay(m.Delay)
}

// RoundTrip answers a chat-completions request (a POST to any URL whose
// path ends in /chat/completions) with [Model.Respond], in process; see
// [agenttest.RespondFunc] for the details. The caller must close the
// response's body.
func (m Model) RoundTrip(r *http.Request) (*http.Response, error) {
	return agenttest.RespondFunc(m.Respond).RoundTrip(r)
}

// Client returns an HTTP client whose requests m answers, for an agent's
// Config.HTTPClient (with [BaseURL] as Config.BaseURL).
func (m Model) Client() *http.Client { return &http.Client{Transport: m} }

// turn is what the model reads from a request.
type turn struct {
	user    string            // the latest real user message ("" if none)
	last    agenttest.Message // the last non-system message
	results []result          // the tool results after the latest user message
	names   map[string]string // tool call id → tool name
}

type result struct{ name, content string }

func isContinue(s string) bool { return strings.TrimSpace(s) == continueMarker }

func readTurn(req *agenttest.Request) turn {
	t := turn{names: map[string]string{}}
	start := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == "user" && !isContinue(m.Content) {
			t.user, start = truncate(m.Content, maxUserText), i
			break
		}
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if r := req.Messages[i].Role; r != "system" && r != "developer" {
			t.last = req.Messages[i]
			break
		}
	}
	for _, m := range req.Messages[start:] {
		for _, c := range m.ToolCalls {
			t.names[c.ID] = c.Name
		}
		if m.Role == "tool" {
			name := t.names[m.ToolCallID]
			if name == "" {
				name = "a tool"
			}
			t.results = append(t.results, result{name, m.Content})
		}
	}
	return t
}

// request is one tool call the user asked for.
type request struct {
	tool string
	args any    // a map[string]string or a struct of strings
	what string // how the plan says it
}

// offer is what a request offers the model besides the user's words.
type offer struct {
	// has reports whether the request offers a tool; nil means any tool
	// (the planning round, whose request lists none).
	has func(name string) bool
	// skills are the names listed in the request's skills block.
	skills []string
}

func (o offer) offers(name string) bool { return o.has == nil || o.has(name) }

var (
	clauseSep   = regexp.MustCompile(`(?i)\s+and\s+|[,;?!]|\.(\s|$)`)
	placeRe     = regexp.MustCompile(`(?i)\b(?:in|for|at)\s+([\p{L}][\p{L}'-]*(?:\s+[\p{L}][\p{L}'-]*){0,2})`)
	zoneRe      = regexp.MustCompile(`\b[A-Za-z]+(?:_[A-Za-z]+)*/[A-Za-z_]+(?:/[A-Za-z_]+)?\b`)
	backtickRe  = regexp.MustCompile("`([^`]+)`")
	runRe       = regexp.MustCompile(`(?i)\b(?:run|execute)\s+(.+)`)
	sayRe       = regexp.MustCompile(`(?i)\bsay\b(.*)`)
	cardTitleRe = regexp.MustCompile(`(?i)\b(?:about|titled|called|for)\s+(.+)`)
	askMeRe     = regexp.MustCompile(`(?i)\bask\s+me\b`)
	subAgentRe  = regexp.MustCompile(`(?i)\bsub-?agents?\b`)
	skillLineRe = regexp.MustCompile(`^- ([A-Za-z0-9][A-Za-z0-9._-]{0,63}): `)
	skillNameRe = regexp.MustCompile("(?i)`([A-Za-z0-9][A-Za-z0-9._-]{0,63})`" + `|\bskill\s+(?:named|called)\s+["“']?([A-Za-z0-9][A-Za-z0-9._-]{0,63})|\bthe\s+["“']?([A-Za-z0-9][A-Za-z0-9._-]{0,63})["”']?\s+skill\b`)
)

// placeStop ends a place name.
var placeStop = map[string]bool{"today": true, "tomorrow": true, "now": true, "please": true, "right": true, "this": true, "and": true,
	"for": true, "with": true, "at": true, "on": true, "then": true, "but": true, "or": true, "to": true}

// zones maps a few city names to their IANA zone.
var zones = map[string]string{
	"paris": "Europe/Paris", "london": "Europe/London", "berlin": "Europe/Berlin", "madrid": "Europe/Madrid",
	"rome": "Europe/Rome", "moscow": "Europe/Moscow", "new york": "America/New_York", "chicago": "America/Chicago",
	"los angeles": "America/Los_Angeles", "san francisco": "America/Los_Angeles", "sao paulo": "America/Sao_Paulo",
	"tokyo": "Asia/Tokyo", "beijing": "Asia/Shanghai", "shanghai": "Asia/Shanghai", "singapore": "Asia/Singapore",
	"dubai": "Asia/Dubai", "delhi": "Asia/Kolkata", "mumbai": "Asia/Kolkata", "sydney": "Australia/Sydney",
	"utc": "UTC", "gmt": "UTC",
}

// words returns the lower-case words of s.
func words(s string) map[string]bool {
	w := map[string]bool{}
	for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	}) {
		w[f] = true
	}
	return w
}

func hasAny(w map[string]bool, keys ...string) bool {
	for _, k := range keys {
		if w[k] {
			return true
		}
	}
	return false
}

// clauseWith returns the first clause of text holding one of the keys, or
// text itself.
func clauseWith(text string, keys ...string) string {
	for _, c := range clauseSep.Split(text, -1) {
		if hasAny(words(c), keys...) {
			return c
		}
	}
	return text
}

// place returns the place named after "in", "for" or "at" in s.
func place(s string) string {
	m := placeRe.FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	var kept []string
	for _, w := range strings.Fields(m[1]) {
		if placeStop[strings.ToLower(w)] {
			break
		}
		kept = append(kept, w)
	}
	return strings.Join(kept, " ")
}

// titleCase capitalises each word of s.
func titleCase(s string) string {
	f := strings.Fields(s)
	for i, w := range f {
		r, n := utf8.DecodeRuneInString(w)
		f[i] = string(unicode.ToUpper(r)) + w[n:]
	}
	return strings.Join(f, " ")
}

// wants reads which tools the user's text asks for, in a fixed order:
// researcher (which takes over the weather and time), get_weather,
// get_time, run_command, get_skill, ask_user_question, show_card.
func wants(text string, o offer) []request {
	w := words(text)
	var out []request
	var weather, clock *request
	if keys := []string{"weather", "forecast", "temperature"}; hasAny(w, keys...) {
		city := place(clauseWith(text, keys...))
		if city == "" {
			city = place(text)
		}
		if city == "" {
			city = "Paris"
		}
		city = titleCase(quote(city, maxName))
		weather = &request{"get_weather", map[string]string{"city": city}, "check the weather in " + city}
	}
	if keys := []string{"time", "clock", "timezone"}; hasAny(w, keys...) {
		clause := clauseWith(text, keys...)
		tz := zoneRe.FindString(clause)
		if tz == "" {
			if p := strings.ToLower(place(clause)); zones[p] != "" {
				tz = zones[p]
			} else if z := zoneRe.FindString(text); z != "" {
				tz = z
			} else {
				tz = "UTC"
			}
		}
		clock = &request{"get_time", map[string]string{"timezone": tz}, "look up the time in " + quote(tz, maxName)}
	}
	if wantsResearch(text, w) && o.offers(ResearcherName) {
		// The researcher finds the weather and the time with tools of
		// its own: its task names them in words it reads the same way.
		var parts []string
		if weather != nil {
			parts = append(parts, "the weather in "+weather.args.(map[string]string)["city"])
		}
		if clock != nil {
			parts = append(parts, "the time in "+quote(clock.args.(map[string]string)["timezone"], maxName))
		}
		if parts == nil {
			parts = []string{"the weather in Paris", "the time in Europe/Paris"}
		}
		task := "Find " + joinAnd(parts) + "."
		out = append(out, request{ResearcherName, map[string]string{"task": task}, "ask the researcher to find " + joinAnd(parts)})
		weather, clock = nil, nil
	}
	if weather != nil {
		out = append(out, *weather)
	}
	if clock != nil {
		out = append(out, *clock)
	}
	if hasAny(w, "run", "execute", "command", "shell", "ls") {
		cmd := command(text)
		out = append(out, request{"run_command", map[string]string{"command": cmd}, "run `" + quote(cmd, maxName) + "`"})
	}
	if hasAny(w, "skill", "skills") {
		if name := skillName(text, o.skills); name != "" {
			out = append(out, request{SkillToolName, map[string]string{"name": name}, "read the skill “" + name + "”"})
		}
	}
	if askMeRe.MatchString(text) || hasAny(w, "question", "questions", "form", "forms") {
		out = append(out, request{AskToolName, demoForm, "prepare a form with a few questions"})
	}
	if w["card"] || w["cards"] || (w["show"] && len(out) == 0) {
		title := "Demo card"
		if m := cardTitleRe.FindStringSubmatch(clauseWith(text, "card", "cards", "show")); m != nil {
			if t := strings.TrimSpace(m[1]); t != "" {
				title = quote(t, maxName)
			}
		}
		out = append(out, request{"show_card", map[string]string{"title": title, "body": "You asked: " + quote(text, maxQuote)}, "show you a card titled “" + title + "”"})
	}
	return out
}

// wantsResearch reports whether the user asked for research or a
// sub-agent.
func wantsResearch(text string, w map[string]bool) bool {
	return hasAny(w, "research", "researcher", "delegate", "subagent", "subagents") || subAgentRe.MatchString(text)
}

// demoForm is the form ask_user_question shows: one question of each kind.
var demoForm = struct {
	Title     string              `json:"title"`
	Questions []interact.Question `json:"questions"`
}{
	Title: "A few questions",
	Questions: []interact.Question{
		{ID: "colour", Question: "Which colour do you like best?", Kind: interact.KindSingle, Options: []string{"red", "green", "blue"}},
		{ID: "days", Question: "Which days suit you?", Kind: interact.KindMultiple, Options: []string{"Monday", "Wednesday", "Friday"}},
		{ID: "note", Question: "Anything else you would like to tell me?", Kind: interact.KindText},
	},
}

// skillName is the skill the user asks for: a skill of the request's
// skills block that the text names, else the first one listed, else a name
// the text gives ("`pdf`", "the pdf skill", "skill named pdf"), else "".
func skillName(text string, listed []string) string {
	if len(listed) > 0 {
		named := map[string]bool{}
		for _, f := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' && r != '.'
		}) {
			named[strings.TrimRight(f, ".-")] = true
		}
		for _, n := range listed {
			if named[strings.ToLower(n)] {
				return n
			}
		}
		return listed[0]
	}
	if m := skillNameRe.FindStringSubmatch(text); m != nil {
		for _, g := range m[1:] {
			if g != "" {
				return g
			}
		}
	}
	return ""
}

// skillsIn returns the skill names of the request's skills block: the
// lines "- name: description" that follow [skills.Intro] in a system
// message (at most maxSkills of them).
func skillsIn(req *agenttest.Request) []string {
	for _, m := range req.Messages {
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		i := strings.Index(m.Content, skills.Intro)
		if i < 0 {
			continue
		}
		rest := strings.TrimLeft(m.Content[i+len(skills.Intro):], "\n")
		var names []string
		for rest != "" && len(names) < maxSkills {
			var line string
			line, rest, _ = strings.Cut(rest, "\n")
			sm := skillLineRe.FindStringSubmatch(line)
			if sm == nil {
				break
			}
			names = append(names, sm[1])
		}
		return names
	}
	return nil
}

// command finds the command line the user wants run.
func command(text string) string {
	if m := backtickRe.FindStringSubmatch(text); m != nil && strings.TrimSpace(m[1]) != "" {
		return strings.TrimSpace(m[1])
	}
	m := runRe.FindStringSubmatch(text)
	if m == nil {
		return "ls"
	}
	cmd := m[1]
	if i := clauseSep.FindStringIndex(cmd); i != nil {
		cmd = cmd[:i[0]]
	}
	f := strings.Fields(cmd)
	for len(f) > 0 && fillers[strings.ToLower(f[0])] {
		f = f[1:]
	}
	if len(f) == 0 {
		return "ls"
	}
	return strings.Join(f, " ")
}

var fillers = map[string]bool{"a": true, "the": true, "this": true, "my": true, "me": true, "shell": true, "command": true, "commands": true, ":": true}

// wantsVoice reports whether the user asked the model to say something.
func wantsVoice(text string) bool { return words(text)["say"] }

// plan is the planning round's reply.
func plan(user string, o offer) string {
	var voice string
	if wantsVoice(user) {
		voice = "<voice>"
	}
	if reqs := wants(user, o); len(reqs) > 0 {
		what := make([]string, len(reqs))
		for i, r := range reqs {
			what[i] = r.what
		}
		return voice + "Sure! I'll " + joinAnd(what) + " for you. <need_tool>"
	}
	if isGreeting(user) {
		return voice + "Hello! Nice to meet you. <no_tool>"
	}
	return voice + "Good question, I can answer that in words. <no_tool>"
}

func isGreeting(text string) bool {
	return hasAny(words(text), "hello", "hi", "hey", "bonjour", "hallo")
}

// answer is the continuation round's full reply.
func answer(user string) string {
	if wantsVoice(user) {
		said := "hello"
		if m := sayRe.FindStringSubmatch(user); m != nil {
			if t := strings.TrimRight(strings.TrimSpace(m[1]), ".!? "); t != "" {
				said = quote(t, maxQuote)
			}
		}
		r, n := utf8.DecodeRuneInString(said)
		return "<voice>" + string(unicode.ToUpper(r)) + said[n:] + "! I said it out loud, so this reply is flagged for speech."
	}
	if isGreeting(user) {
		return "Hello! I'm the planround demo model. I run on your machine with no API key, and I follow the planning protocol: " +
			"first a short plan that ends with an intent tag, then the full answer. " +
			"Ask me for the weather in a city, the time in a time zone, to run a command such as `ls`, to show you a card, " +
			"to ask you a few questions in a form, or to delegate research to a sub-agent."
	}
	return fmt.Sprintf("You asked: “%s”. I'm only the built-in demo model, so I can't really answer open questions, "+
		"but this reply shows the continuation round: my plan said no tool was needed, so here is the whole answer in words. "+
		"Try asking for the weather in Paris, the time in Tokyo, to run `ls`, or to show a card.", quote(strings.TrimSpace(user), maxQuote))
}

// final is the last reply of the tool loop: it quotes this turn's results.
func final(t turn) string {
	var b strings.Builder
	b.WriteString("Here is what I found:\n")
	for _, r := range t.results {
		content := strings.TrimSpace(r.content)
		if lines := strings.SplitN(content, "\n", 13); len(lines) > 12 {
			content = strings.Join(lines[:12], "\n") + "\n…"
		}
		if n := 600; len(content) > n {
			content = truncate(content, n) + "…"
		}
		if strings.Contains(content, "\n") {
			fmt.Fprintf(&b, "- %s:\n```\n%s\n```\n", r.name, content)
		} else {
			fmt.Fprintf(&b, "- %s: %s\n", r.name, content)
		}
	}
	b.WriteString("That's everything you asked for.")
	return b.String()
}

// isSummaryRequest reports whether req is the agent's summary request
// (agent.SummaryPrompt, then the transcript), which streams like a round's.
func isSummaryRequest(req *agenttest.Request) bool {
	return len(req.Messages) == 2 && req.Messages[0].Role == "system" && req.Messages[0].Content == agent.SummaryPrompt
}

// summary answers a summary request (the agent's, or any request that did
// not ask for a stream): the user's messages, briefly. In the agent's, they
// are the transcript's "user: " lines.
func summary(req *agenttest.Request) string {
	var topics []string
	add := func(s string) { topics = append(topics, truncate(strings.TrimSpace(s), 80)) }
	if isSummaryRequest(req) {
		for line := range strings.Lines(req.Messages[1].Content) {
			if said, ok := strings.CutPrefix(line, "user: "); ok && !isContinue(said) {
				add(said)
			}
		}
	} else {
		for _, m := range req.Messages {
			if m.Role == "user" && !isContinue(m.Content) {
				add(m.Content)
			}
		}
	}
	if len(topics) == 0 {
		return "Summary: nothing to summarise yet."
	}
	if len(topics) > maxTopics {
		topics = append([]string{"…"}, topics[len(topics)-maxTopics:]...)
	}
	return "Summary: the user asked: " + strings.Join(topics, "; ") + "."
}

func joinAnd(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// quote returns s, or its first n runes and "…" when it is longer.
func quote(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// split cuts text into deltas of 2 to 5 runes, in a fixed pattern, the way
// models stream: tags and words are split too.
func split(text string) []string {
	sizes := [...]int{3, 5, 2, 4}
	var out []string
	for i := 0; text != ""; i++ {
		n, runes := 0, 0
		for n < len(text) && runes < sizes[i%len(sizes)] {
			_, w := utf8.DecodeRuneInString(text[n:])
			n += w
			runes++
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

// splitN cuts s into pieces of about n bytes, on rune boundaries (JSON
// arguments: split anywhere, even inside a string, as providers do).
func splitN(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

// promptSize is the number of bytes of the request's messages.
func promptSize(req *agenttest.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
	}
	return n
}
