package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/intent"
)

// script is the model. It keeps no state, so that a run resumed by another
// process gets the answers the first one would have: the planning request
// (no tools) asks for the tool loop; a tool round whose last message is a
// tool message answers "done: " and the key (for a form, followed by
// "; answers: " and the tool message, so that a test sees what the model
// was given); any other tool round calls the key's tool: ask_user_question
// with askForm's questions for a key that starts with "ask", else the tool
// of toolFor with {"key": key}. The key is the last user message (not the
// agent's "[continue]").
func script(req *agenttest.Request) agenttest.Response {
	if !req.HasTools() {
		return agenttest.Reply().Text("On it. <need_tool>").Finish("stop")
	}
	key := lastUserMessage(req)
	if last, ok := lastNonSystem(req); ok && last.Role == "tool" {
		text := "done: " + key
		if strings.HasPrefix(key, "ask") {
			text += "; answers: " + last.Content
		}
		return agenttest.Reply().Text(text).Finish("stop")
	}
	var args []byte
	var err error
	if toolFor(key) == askTool {
		args, err = json.Marshal(askForm(key))
	} else {
		args, err = json.Marshal(toolArgs{Key: key})
	}
	if err != nil {
		return agenttest.HTTPError(500, "script: "+err.Error())
	}
	return agenttest.Reply().Call(0, newCallID(), toolFor(key), string(args)).Finish("tool_calls")
}

// askTool is the name of interact's ask_user_question tool.
const askTool = "ask_user_question"

// toolFor names the tool the script calls for key.
func toolFor(key string) string {
	switch {
	case strings.HasPrefix(key, "slow"):
		return "slow"
	case strings.HasPrefix(key, "ask"):
		return askTool
	}
	return "effect"
}

// askForm is the form the script asks for key: the key as its title, one
// single choice question ("color": red or blue) and one text question
// ("note").
func askForm(key string) map[string]any {
	return map[string]any{
		"title": key,
		"questions": []map[string]any{
			{"id": "color", "question": "Which color?", "kind": "single", "options": []string{"red", "blue"}},
			{"id": "note", "question": "Anything else?", "kind": "text"},
		},
	}
}

// lastUserMessage returns the content of the last user message that is
// not the agent's transition after the planning round.
func lastUserMessage(req *agenttest.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == "user" && m.Content != intent.ContinueMessage {
			return m.Content
		}
	}
	return ""
}

func lastNonSystem(req *agenttest.Request) (agenttest.Message, bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role != "system" && m.Role != "developer" {
			return m, true
		}
	}
	return agenttest.Message{}, false
}

func newCallID() string {
	var b [8]byte
	rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// toolArgs are the arguments of both tools.
type toolArgs struct {
	Key string `json:"key"`
}

// effects is the file that gets one line per tool execution.
type effects struct {
	holder string
	mu     sync.Mutex // one write at a time from this process (O_APPEND orders them across processes)
	f      *os.File
}

// effectLine is one line of the effects file.
type effectLine struct {
	Tool   string `json:"tool"`
	Key    string `json:"key"`
	Holder string `json:"holder"`
	PID    int    `json:"pid"`
}

func openEffects(path, holder string) (*effects, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &effects{holder: holder, f: f}, nil
}

func (e *effects) close() { e.f.Close() }

// record appends the line of one execution in one write.
func (e *effects) record(tool, key string) error {
	b, err := json.Marshal(effectLine{Tool: tool, Key: key, Holder: e.holder, PID: os.Getpid()})
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("record the execution: %w", err)
	}
	return nil
}

// effectTool is the side effect the tests count: it records its execution
// and returns.
func effectTool(e *effects) agent.Tool {
	return agent.NewTool("effect", "Has an effect that must happen at most once per approval.",
		func(ctx context.Context, args toolArgs, _ agent.Progress) (string, error) {
			if err := e.record("effect", args.Key); err != nil {
				return "", err
			}
			return "effect done for " + args.Key, nil
		})
}

// slowMaxTicks bounds the progress a slow call writes; it keeps blocking
// after.
const slowMaxTicks = 1200

// slowTool records its execution, then writes progress every 50 ms and
// blocks until its run ends.
func slowTool(e *effects) agent.Tool {
	return agent.NewTool("slow", "Works until it is stopped.",
		func(ctx context.Context, args toolArgs, progress agent.Progress) (string, error) {
			progress.WriteString("started " + args.Key + "\n")
			if err := e.record("slow", args.Key); err != nil {
				return "", err
			}
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for i := 1; ; i++ {
				select {
				case <-ctx.Done():
					return "", errors.New("slow: stopped before it finished")
				case <-t.C:
					if i <= slowMaxTicks {
						fmt.Fprintf(progress, "tick %d\n", i)
					}
				}
			}
		})
}
