package memory_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/planround/planround/memory"
)

// mapStore is the start of a store kept in maps: CreateSession and Append
// as every store writes them. The other methods of [memory.Store] follow
// the same pattern: check the context, check the input, find the session,
// and return copies.
type mapStore struct {
	mu       sync.Mutex // guards sessions, messages and lastID
	sessions map[string]memory.Session
	messages map[string][]memory.Message
	lastID   int64
}

func (s *mapStore) CreateSession(ctx context.Context, sess memory.Session) (memory.Session, error) {
	if err := ctx.Err(); err != nil {
		return memory.Session{}, err
	}
	if err := memory.ValidateSession(sess); err != nil {
		return memory.Session{}, fmt.Errorf("mapstore: create session: %w", err)
	}
	if sess.ID == "" {
		sess.ID = memory.NewSessionID()
	}
	if sess.CreatedAt.IsZero() {
		sess.CreatedAt = time.Now().UTC()
	}
	if sess.UpdatedAt.IsZero() {
		sess.UpdatedAt = sess.CreatedAt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess.ID]; ok {
		return memory.Session{}, fmt.Errorf("mapstore: session %q: %w", sess.ID, memory.ErrExists)
	}
	s.sessions[sess.ID] = sess
	return sess, nil
}

func (s *mapStore) Append(ctx context.Context, sessionID string, msgs ...memory.Message) ([]memory.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Check everything before writing anything: all the messages or none.
	if err := memory.ValidateMessages(msgs); err != nil {
		return nil, fmt.Errorf("mapstore: append to %q: %w", sessionID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[sessionID]
	if !ok {
		return nil, fmt.Errorf("mapstore: session %q: %w", sessionID, memory.ErrNotFound)
	}
	// Keep a copy the caller cannot change, and return another one.
	out := memory.CloneMessages(msgs)
	now := time.Now().UTC()
	for i := range out {
		s.lastID++
		out[i].ID = s.lastID
		if out[i].CreatedAt.IsZero() {
			out[i].CreatedAt = now
		}
	}
	s.messages[sessionID] = append(s.messages[sessionID], memory.CloneMessages(out)...)
	sess.UpdatedAt = now
	s.sessions[sessionID] = sess
	return out, nil
}

func Example_storeAuthor() {
	ctx := context.Background()
	st := &mapStore{sessions: map[string]memory.Session{}, messages: map[string][]memory.Message{}}

	gen, err := st.CreateSession(ctx, memory.Session{Title: "no id given"})
	if err != nil {
		panic(err)
	}
	fmt.Println("generated id of", len(gen.ID), "hex digits")
	sess, err := st.CreateSession(ctx, memory.Session{ID: "s1"})
	if err != nil {
		panic(err)
	}

	// Every store refuses the same input with the same words, and
	// writes nothing of it.
	_, err = st.Append(ctx, sess.ID, memory.Message{Role: memory.RoleUser, Content: "hi"}, memory.Message{Role: "robot"})
	fmt.Println(err)

	out, err := st.Append(ctx, sess.ID,
		memory.Message{Role: memory.RoleUser, Content: "what time is it?"},
		memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Name: "get_time", Arguments: []byte(`{}`)}}})
	if err != nil {
		panic(err)
	}
	out[0].Content = "changed by the caller" // the store's copy does not change
	for _, m := range st.messages[sess.ID] {
		fmt.Printf("%d %s %q, %d tool call(s)\n", m.ID, m.Role, m.Content, len(m.ToolCalls))
	}
	// Output:
	// generated id of 32 hex digits
	// mapstore: append to "s1": message 1: invalid role "robot"
	// 1 user "what time is it?", 0 tool call(s)
	// 2 assistant "", 1 tool call(s)
}
