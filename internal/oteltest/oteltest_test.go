package oteltest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/planround/planround/internal/oteltest"
)

func TestSpans(t *testing.T) {
	tp := &oteltest.TracerProvider{}
	tr := tp.Tracer("t")
	ctx, root := tr.Start(context.Background(), "root", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("a", "1")))
	require.True(t, root.IsRecording())
	cctx, child := tr.Start(ctx, "child")
	assert.Equal(t, child, trace.SpanFromContext(cctx))
	child.SetAttributes(attribute.Int("n", 1), attribute.String("s", "x"), attribute.Int("n", 2))
	child.AddEvent("first", trace.WithAttributes(attribute.Bool("b", true)))
	child.RecordError(errors.New("boom"))
	child.SetStatus(codes.Error, "boom")
	child.SetStatus(codes.Unset, "") // never back to a less severe code
	_, other := tr.Start(ctx, "other")
	child.End()
	child.SetAttributes(attribute.Int("late", 1)) // after End: ignored
	child.End()
	assert.False(t, child.IsRecording())
	root.SetStatus(codes.Ok, "ignored")
	root.SetStatus(codes.Error, "too late: Ok is final")
	root.End()
	assert.Len(t, tp.Ended(), 2, "a span that has not ended is not there")
	other.End()

	got := tp.Ended()
	require.Len(t, got, 3)
	r, c, o := got[0], got[1], got[2]
	assert.Equal(t, []string{"root", "child", "other"}, []string{r.Name, c.Name, o.Name}, "in the order they started")
	assert.False(t, r.Parent.IsValid())
	assert.True(t, r.SpanContext.IsSampled())
	assert.Equal(t, trace.SpanKindServer, r.Kind)
	assert.Equal(t, []attribute.KeyValue{attribute.String("a", "1")}, r.Attributes)
	assert.Equal(t, oteltest.Status{Code: codes.Ok}, r.Status)

	assert.Equal(t, r.SpanContext, c.Parent)
	assert.Equal(t, r.SpanContext.TraceID(), c.SpanContext.TraceID())
	assert.NotEqual(t, r.SpanContext.SpanID(), c.SpanContext.SpanID())
	assert.Equal(t, []attribute.KeyValue{attribute.Int("n", 2), attribute.String("s", "x")}, c.Attributes)
	require.Len(t, c.Events, 2)
	assert.Equal(t, "first", c.Events[0].Name)
	assert.Equal(t, []attribute.KeyValue{attribute.Bool("b", true)}, c.Events[0].Attributes)
	assert.Equal(t, "exception", c.Events[1].Name)
	assert.Equal(t, []attribute.KeyValue{attribute.String("exception.type", "*errors.errorString"), attribute.String("exception.message", "boom")}, c.Events[1].Attributes)
	assert.Equal(t, oteltest.Status{Code: codes.Error, Description: "boom"}, c.Status)
	assert.False(t, c.End.Before(c.Start))

	tp.Reset()
	assert.Empty(t, tp.Ended())
}

// A dropping provider's span records nothing but has a span context of
// its own, unsampled, in its parent's trace.
func TestDrop(t *testing.T) {
	tp := &oteltest.TracerProvider{Drop: true}
	parent := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	}))
	ctx, s := tp.Tracer("t").Start(parent, "dropped")
	assert.False(t, s.IsRecording())
	sc := trace.SpanContextFromContext(ctx)
	assert.Equal(t, trace.TraceID{1}, sc.TraceID())
	assert.NotEqual(t, trace.SpanID{2}, sc.SpanID())
	assert.True(t, sc.IsValid())
	assert.False(t, sc.IsSampled())
	s.End()
	assert.Empty(t, tp.Ended())
}

func TestMetrics(t *testing.T) {
	mp := &oteltest.MeterProvider{}
	m := mp.Meter("m")
	ctx := context.Background()
	h, err := m.Int64Histogram("h")
	require.NoError(t, err)
	require.True(t, h.Enabled(ctx))
	a, b := metric.WithAttributes(attribute.String("k", "a")), metric.WithAttributes(attribute.String("k", "b"))
	h.Record(ctx, 3, a)
	h.Record(ctx, 4, b)
	h.Record(ctx, 5, a)
	f, err := m.Float64Histogram("f")
	require.NoError(t, err)
	f.Record(ctx, 0.5)
	f.Record(ctx, 0.25)
	ud, err := m.Int64UpDownCounter("ud")
	require.NoError(t, err)
	ud.Add(ctx, 1)
	ud.Add(ctx, -1)
	_, err = m.Float64Counter("unused")
	require.NoError(t, err)

	got := mp.Metrics()
	assert.Equal(t, oteltest.Metric{Name: "h", Instrument: "Int64Histogram", Points: []oteltest.Point{
		{Attributes: attribute.NewSet(attribute.String("k", "a")), Count: 2, Int: 8},
		{Attributes: attribute.NewSet(attribute.String("k", "b")), Count: 1, Int: 4},
	}}, got["h"])
	assert.Equal(t, oteltest.Metric{Name: "f", Instrument: "Float64Histogram", Points: []oteltest.Point{
		{Attributes: attribute.NewSet(), Count: 2, Float: 0.75},
	}}, got["f"])
	assert.Equal(t, []oteltest.Point{{Attributes: attribute.NewSet(), Count: 2, Int: 0}}, got["ud"].Points)
	assert.Empty(t, got["unused"].Points)
	assert.Equal(t, "Float64Counter", got["unused"].Instrument)
}
