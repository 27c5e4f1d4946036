package agent

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/planround/planround/internal/oteltest"
	"github.com/planround/planround/stream"
)

func TestProviderName(t *testing.T) {
	for base, want := range map[string]string{
		"":                                    "openai",
		"https://api.openai.com/v1":           "openai",
		"https://API.OpenAI.com:443/v1":       "openai",
		"https://me.openai.azure.com/openai":  "azure.ai.openai",
		"https://api.mistral.ai/v1":           "mistral_ai",
		"https://api.groq.com/openai/v1":      "groq",
		"http://127.0.0.1:11434/v1":           "",
		"https://openai-proxy.example.com/v1": "",
	} {
		if got := providerName(base); got != want {
			t.Errorf("providerName(%q) = %q, want %q", base, got, want)
		}
	}
}

func TestBound(t *testing.T) {
	tel := &telemetry{limit: 5}
	for s, want := range map[string]string{
		"":       "",
		"hello":  "hello",
		"hello!": "hello…[truncated: 1 of 6 bytes]",
		"héllo":  "héll…[truncated: 1 of 6 bytes]",
		"ééé":    "éé…[truncated: 2 of 6 bytes]",
	} {
		if got := tel.bound(s); got != want {
			t.Errorf("bound(%q) = %q, want %q", s, got, want)
		}
	}
}

// tracerProviders are the providers the span tests run with: records
// says whether its spans record, ownContext whether a span it starts gets
// a span context of its own (a sampler that drops it names one).
func tracerProviders() []struct {
	name                string
	tp                  trace.TracerProvider // nil: the global one, with no provider set
	records, ownContext bool
} {
	return []struct {
		name                string
		tp                  trace.TracerProvider
		records, ownContext bool
	}{
		{"global tracer, no provider set", nil, false, false},
		{"no-op provider", noop.NewTracerProvider(), false, false},
		{"recording provider", &oteltest.TracerProvider{}, true, true},
		{"sampler that drops the span", &oteltest.TracerProvider{Drop: true}, false, true},
	}
}

// A run, and a model call, whose tracer records nothing and gives its span
// the caller's span context go on with the caller's context: they hold no
// span of their own while they wait or stream. A tracer that records, or
// that names a span of its own even without recording it (a sampler that
// drops it), still gets its span, under the caller's trace.
func TestSpanOnlyWhenItChangesSomething(t *testing.T) {
	parent := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	}))
	starts := map[string]func(tel *telemetry) (context.Context, trace.Span){
		"run": func(tel *telemetry) (context.Context, trace.Span) {
			ctx, rt := tel.startRun(parent, "s", false)
			return ctx, rt.span
		},
		"chat": func(tel *telemetry) (context.Context, trace.Span) {
			ctx, ct := tel.startChat(parent, "s", request{}, keyRound.Int(1))
			return ctx, ct.span
		},
	}
	for what, start := range starts {
		for _, tt := range tracerProviders() {
			t.Run(what+"/"+tt.name, func(t *testing.T) {
				tel, err := newTelemetry(Config{Model: "m", TracerProvider: tt.tp})
				require.NoError(t, err)
				ctx, span := start(tel)
				defer span.End()
				if !tt.ownContext {
					assert.Equal(t, parent, ctx, "the caller's context, unchanged")
					assert.Equal(t, noSpan, span, "no span held")
					return
				}
				assert.NotEqual(t, parent, ctx)
				sc := trace.SpanContextFromContext(ctx)
				assert.Equal(t, trace.TraceID{1}, sc.TraceID(), "the caller's trace")
				assert.NotEqual(t, trace.SpanID{2}, sc.SpanID(), "a span of its own")
			})
		}
	}
}

// TestApprovalSpanOnlyWhenItRecords checks that a wait for an approval
// holds its await_approval span only when that span records: the global
// tracer without a provider, a no-op provider and a sampler that drops
// it leave the noSpan in its place.
func TestApprovalSpanOnlyWhenItRecords(t *testing.T) {
	for _, tt := range tracerProviders() {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(Config{Model: "m", TracerProvider: tt.tp})
			require.NoError(t, err)
			r := &run{a: a, ctx: context.Background(), obs: a.observer(context.Background())}
			at := r.startApproval(&callState{call: stream.Call{ID: "c1", Name: "get_weather"}})
			defer at.span.End()
			assert.Equal(t, tt.records, at.span != noSpan, "a span of its own")
			assert.Equal(t, tt.records, at.span.IsRecording())
		})
	}
}
