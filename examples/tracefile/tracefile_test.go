package tracefile_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/examples/tracefile"
)

// TestStart: each span is a line of JSON in the file once it has ended,
// with its parent's span id and the service's name in its resource.
func TestStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	tp, stop, err := tracefile.Start(path, "test-service")
	require.NoError(t, err)
	tr := tp.Tracer("t")
	ctx, parent := tr.Start(context.Background(), "parent")
	_, child := tr.Start(ctx, "child")
	child.End()

	type span struct {
		Name        string
		SpanContext struct{ TraceID, SpanID string }
		Parent      struct{ SpanID string }
		Resource    []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	read := func() []span {
		t.Helper()
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var spans []span
		for line := range strings.Lines(string(data)) {
			var s span
			require.NoError(t, json.Unmarshal([]byte(line), &s), "not a span: %q", line)
			spans = append(spans, s)
		}
		return spans
	}
	spans := read()
	require.Len(t, spans, 1, "the child is written as it ends")
	assert.Equal(t, "child", spans[0].Name)

	parent.End()
	require.NoError(t, stop())
	spans = read()
	require.Len(t, spans, 2)
	assert.Equal(t, "parent", spans[1].Name)
	assert.Equal(t, spans[1].SpanContext.SpanID, spans[0].Parent.SpanID)
	assert.Equal(t, spans[1].SpanContext.TraceID, spans[0].SpanContext.TraceID)
	service := ""
	for _, kv := range spans[1].Resource {
		if kv.Key == "service.name" {
			service, _ = kv.Value.Value.(string)
		}
	}
	assert.Equal(t, "test-service", service)
}

// A new file is its owner's alone; a file that exists is emptied and
// keeps its mode.
func TestStartFileModes(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new.jsonl")
	_, stop, err := tracefile.Start(fresh, "s")
	require.NoError(t, err)
	require.NoError(t, stop())
	fi, err := os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	shared := filepath.Join(dir, "shared.jsonl")
	require.NoError(t, os.WriteFile(shared, []byte("old\n"), 0o600))
	require.NoError(t, os.Chmod(shared, 0o644)) // whatever the umask
	_, stop, err = tracefile.Start(shared, "s")
	require.NoError(t, err)
	require.NoError(t, stop())
	fi, err = os.Stat(shared)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	assert.Zero(t, fi.Size(), "emptied")
}

func TestStartCannotCreate(t *testing.T) {
	tp, stop, err := tracefile.Start(filepath.Join(t.TempDir(), "no", "such", "dir", "t.jsonl"), "s")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "-trace: "), "%v", err)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Nil(t, tp)
	assert.Nil(t, stop)
}
