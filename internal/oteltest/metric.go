package oteltest

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	"go.opentelemetry.io/otel/metric/noop"
)

// MeterProvider records the measurements of the counters, up-down
// counters and histograms its meters make (int64 and float64 alike),
// summed per instrument and attribute set. Gauges and observable
// instruments record nothing. Its zero value is ready to use; it is safe
// for concurrent use.
type MeterProvider struct {
	embedded.MeterProvider

	mu      sync.Mutex
	metrics map[string]*Metric // by instrument name; guarded by mu
}

// Metric is what one instrument recorded.
type Metric struct {
	Name string
	// Instrument is the kind of instrument that made it, its method's name
	// in metric.Meter: "Int64Histogram", "Float64Counter", ...
	Instrument string
	// Points has one point per attribute set, in the order of their first
	// measurement.
	Points []Point
}

// Point is the measurements of one attribute set.
type Point struct {
	Attributes attribute.Set
	// Count is the number of measurements; Int (int64 instruments) or
	// Float (float64 instruments) their sum.
	Count int64
	Int   int64
	Float float64
}

// Meter returns a meter whose instruments mp records.
func (mp *MeterProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return meter{mp: mp}
}

// Metrics returns what every instrument recorded, by instrument name. An
// instrument made but never used has no points.
func (mp *MeterProvider) Metrics() map[string]Metric {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	out := make(map[string]Metric, len(mp.metrics))
	for name, m := range mp.metrics {
		c := *m
		c.Points = append([]Point(nil), m.Points...)
		out[name] = c
	}
	return out
}

// instrument returns the metric of the instrument name, made by kind.
func (mp *MeterProvider) instrument(name, kind string) *Metric {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.metrics == nil {
		mp.metrics = map[string]*Metric{}
	}
	m, ok := mp.metrics[name]
	if !ok {
		m = &Metric{Name: name, Instrument: kind}
		mp.metrics[name] = m
	}
	return m
}

// add adds one measurement to m's point of attrs.
func (mp *MeterProvider) add(m *Metric, attrs attribute.Set, i int64, f float64) {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	for k := range m.Points {
		if p := &m.Points[k]; p.Attributes.Equals(&attrs) {
			p.Count, p.Int, p.Float = p.Count+1, p.Int+i, p.Float+f
			return
		}
	}
	m.Points = append(m.Points, Point{Attributes: attrs, Count: 1, Int: i, Float: f})
}

// meter makes recording instruments; noop.Meter makes the others.
type meter struct {
	noop.Meter
	mp *MeterProvider
}

func (m meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return m.int64s(name, "Int64Counter"), nil
}

func (m meter) Int64UpDownCounter(name string, _ ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	return m.int64s(name, "Int64UpDownCounter"), nil
}

func (m meter) Int64Histogram(name string, _ ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	return m.int64s(name, "Int64Histogram"), nil
}

func (m meter) Float64Counter(name string, _ ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	return m.float64s(name, "Float64Counter"), nil
}

func (m meter) Float64UpDownCounter(name string, _ ...metric.Float64UpDownCounterOption) (metric.Float64UpDownCounter, error) {
	return m.float64s(name, "Float64UpDownCounter"), nil
}

func (m meter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return m.float64s(name, "Float64Histogram"), nil
}

func (m meter) int64s(name, kind string) int64s {
	return int64s{mp: m.mp, m: m.mp.instrument(name, kind)}
}

func (m meter) float64s(name, kind string) float64s {
	return float64s{mp: m.mp, m: m.mp.instrument(name, kind)}
}

// int64s is an int64 counter, up-down counter or histogram: its own Add,
// Record and Enabled hide those of the no-op instruments it embeds for
// their marker methods.
type int64s struct {
	noop.Int64Counter
	noop.Int64UpDownCounter
	noop.Int64Histogram
	mp *MeterProvider
	m  *Metric
}

func (c int64s) Enabled(context.Context) bool { return true }

func (c int64s) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.mp.add(c.m, metric.NewAddConfig(opts).Attributes(), v, 0)
}

func (c int64s) Record(_ context.Context, v int64, opts ...metric.RecordOption) {
	c.mp.add(c.m, metric.NewRecordConfig(opts).Attributes(), v, 0)
}

// float64s is int64s for float64 instruments.
type float64s struct {
	noop.Float64Counter
	noop.Float64UpDownCounter
	noop.Float64Histogram
	mp *MeterProvider
	m  *Metric
}

func (c float64s) Enabled(context.Context) bool { return true }

func (c float64s) Add(_ context.Context, v float64, opts ...metric.AddOption) {
	c.mp.add(c.m, metric.NewAddConfig(opts).Attributes(), 0, v)
}

func (c float64s) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	c.mp.add(c.m, metric.NewRecordConfig(opts).Attributes(), 0, v)
}
