// Package oteltest records, in memory, what code gives the OpenTelemetry
// API: the spans a [TracerProvider] starts and the measurements a
// [MeterProvider]'s instruments take. Tests read them back.
//
// It stands in for the SDK's tracetest.SpanRecorder and metric
// ManualReader, so that the module's go.mod needs the API alone
// (go.opentelemetry.io/otel, its trace and metric modules) and not the
// SDK (issue 37). It records what the API was given, as the SDK would keep
// it (an attribute set twice keeps its last value, an error is an
// "exception" event, a status keeps the most severe code), and does not
// sample, batch, export or aggregate into buckets.
package oteltest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerProvider records every span its tracers start, once the span has
// ended. Its zero value is ready to use; it is safe for concurrent use.
type TracerProvider struct {
	embedded.TracerProvider

	// Drop makes its spans record nothing, each still with a span context
	// of its own, unsampled, in its parent's trace: what an SDK provider
	// whose sampler drops every span starts.
	Drop bool

	mu    sync.Mutex
	seq   int64   // spans started so far
	ended []Ended // in the order they started; guarded by mu
}

// Ended is a span that ended: what it was given.
type Ended struct {
	Name string
	// SpanContext is the span's, Parent its parent's (not valid for a
	// root span).
	SpanContext, Parent trace.SpanContext
	Kind                trace.SpanKind
	Start, End          time.Time
	// Attributes in the order their keys were first set, each with the
	// last value it was given.
	Attributes []attribute.KeyValue
	Events     []Event
	Status     Status

	seq int64
}

// Event is an event added to a span (an error recorded is one, named
// "exception", with exception.type and exception.message).
type Event struct {
	Name       string
	Time       time.Time
	Attributes []attribute.KeyValue
}

// Status is a span's status.
type Status struct {
	Code        codes.Code
	Description string // only with codes.Error
}

// Tracer returns a tracer whose spans tp records.
func (tp *TracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return tracer{tp: tp}
}

// Ended returns the spans that ended, in the order they started.
func (tp *TracerProvider) Ended() []Ended {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.ended)
}

// Reset forgets the spans that ended.
func (tp *TracerProvider) Reset() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.ended = nil
}

func (tp *TracerProvider) record(e Ended) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	i, _ := slices.BinarySearchFunc(tp.ended, e.seq, func(x Ended, seq int64) int { return cmp.Compare(x.seq, seq) })
	tp.ended = slices.Insert(tp.ended, i, e)
}

type tracer struct {
	embedded.Tracer
	tp *TracerProvider
}

// Start starts a span, the child of the span ctx carries unless the
// options ask for a new root.
func (t tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	var parent trace.SpanContext
	if !cfg.NewRoot() {
		parent = trace.SpanContextFromContext(ctx)
	}
	sc := trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: newSpanID(), TraceState: parent.TraceState()}
	if !parent.IsValid() {
		sc.TraceID = newTraceID()
	}
	if !t.tp.Drop {
		sc.TraceFlags = trace.FlagsSampled
	}
	t.tp.mu.Lock()
	t.tp.seq++
	seq := t.tp.seq
	t.tp.mu.Unlock()
	start := cfg.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	s := &span{tp: t.tp, recording: !t.tp.Drop, data: Ended{
		Name: name, SpanContext: trace.NewSpanContext(sc), Parent: parent,
		Kind: cfg.SpanKind(), Start: start, seq: seq,
	}}
	s.setAttributes(cfg.Attributes())
	return trace.ContextWithSpan(ctx, s), s
}

func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		for i := range id {
			id[i] = byte(rand.Uint32())
		}
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		for i := range id {
			id[i] = byte(rand.Uint32())
		}
	}
	return id
}

// span is a span being recorded. Links are not recorded (noop.Span's
// AddLink), nor anything of a span that does not record.
type span struct {
	noop.Span
	tp *TracerProvider

	mu        sync.Mutex
	recording bool  // false once ended, or for a dropped span; guarded by mu
	data      Ended // guarded by mu
}

func (s *span) SpanContext() trace.SpanContext { return s.data.SpanContext } // set once in Start

func (s *span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recording
}

func (s *span) TracerProvider() trace.TracerProvider { return s.tp }

func (s *span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recording {
		s.data.Name = name
	}
}

func (s *span) SetAttributes(kvs ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recording {
		s.setAttributes(kvs)
	}
}

// setAttributes sets kvs, the last value of a key replacing its earlier
// one; invalid attributes are dropped. s.mu is held (or s is not shared
// yet).
func (s *span) setAttributes(kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		if !kv.Valid() {
			continue
		}
		if i := slices.IndexFunc(s.data.Attributes, func(a attribute.KeyValue) bool { return a.Key == kv.Key }); i >= 0 {
			s.data.Attributes[i] = kv
		} else {
			s.data.Attributes = append(s.data.Attributes, kv)
		}
	}
}

func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	s.addEvent(name, trace.NewEventConfig(opts...))
}

// RecordError adds the "exception" event the SDK adds: the error's type
// and message, then the options' attributes.
func (s *span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	cfg := trace.NewEventConfig(opts...)
	attrs := append([]attribute.KeyValue{
		attribute.String("exception.type", fmt.Sprintf("%T", err)),
		attribute.String("exception.message", err.Error()),
	}, cfg.Attributes()...)
	s.addEvent("exception", trace.NewEventConfig(trace.WithAttributes(attrs...), trace.WithTimestamp(cfg.Timestamp())))
}

func (s *span) addEvent(name string, cfg trace.EventConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recording {
		return
	}
	at := cfg.Timestamp()
	if at.IsZero() {
		at = time.Now()
	}
	s.data.Events = append(s.data.Events, Event{Name: name, Time: at, Attributes: cfg.Attributes()})
}

// SetStatus sets the status as the SDK does: a code never gives way to a
// less severe one (Unset < Error < Ok), and only Error keeps its
// description.
func (s *span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recording || code < s.data.Status.Code {
		return
	}
	if code != codes.Error {
		description = ""
	}
	s.data.Status = Status{Code: code, Description: description}
}

// End records the span; a second End, or the End of a span that does
// not record, does nothing.
func (s *span) End(opts ...trace.SpanEndOption) {
	s.mu.Lock()
	if !s.recording {
		s.mu.Unlock()
		return
	}
	s.recording = false
	cfg := trace.NewSpanEndConfig(opts...)
	s.data.End = cfg.Timestamp()
	if s.data.End.IsZero() {
		s.data.End = time.Now()
	}
	e := s.data
	s.mu.Unlock()
	s.tp.record(e)
}
