package agent

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/planround/planround/memory"
)

// TestAPILogNilAllocatesNothing: without an API log (or with one that
// keeps metadata only), the per-call hooks of the log allocate nothing:
// no context value, no copy of the body.
func TestAPILogNilAllocatesNothing(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]apiLogger{
		"nil":           {},
		"metadata only": {log: &memory.MemStore{}},
	} {
		ctx := context.Background()
		allocs := testing.AllocsPerRun(100, func() {
			c, sb := l.withSentBody(ctx)
			if sb != nil || c != ctx {
				t.Fatal("a body was asked for")
			}
			captureBody(req)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, allocs)
		}
	}
	// With content, the body is copied.
	l := apiLogger{log: &memory.MemStore{}, content: true}
	ctx, sb := l.withSentBody(context.Background())
	captureBody(req.WithContext(ctx))
	if string(sb.b) != `{"model":"m"}` {
		t.Fatalf("captured %q", sb.b)
	}
}
