package mcpclient

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// withTraceContext returns meta with the W3C trace context of ctx added
// under the keys "traceparent" and "tracestate" (the latter when ctx has
// one), so that a server that reads a request's _meta continues the
// caller's trace: the span of the agent's execute_tool becomes the parent
// of the server's. A ctx without a valid span context leaves meta as it is
// and costs one context lookup.
func withTraceContext(ctx context.Context, meta *mcp.Meta) *mcp.Meta {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return meta
	}
	if meta == nil {
		meta = &mcp.Meta{}
	}
	if meta.AdditionalFields == nil {
		meta.AdditionalFields = make(map[string]any, len(carrier))
	}
	for k, v := range carrier {
		meta.AdditionalFields[k] = v
	}
	return meta
}
