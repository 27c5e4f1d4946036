// Package tracefile writes the OpenTelemetry spans of a program to a file,
// one JSON object per line: the -trace flag of the examples (the CLI and the
// web chat), which hand the provider to agent.Config.TracerProvider.
//
// It is where the examples' module needs the OpenTelemetry SDK (the stdout
// exporter and the tracer provider); the SDK's own module needs only the
// OpenTelemetry API.
package tracefile

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Start creates path and returns a tracer provider that writes every ended
// span to it as one JSON object per line (the stdout exporter, run
// synchronously: a span is in the file once it has ended), its resource's
// service.name service, and the function that flushes and shuts the
// provider down and closes the file. Its errors, and those of the function,
// begin with "-trace", the flag the examples take path from.
//
// A new file is readable by its owner only (0600; os.Create's 0666 would
// be 0644 under the usual umask, readable by every user of the machine).
// A file that exists is emptied and keeps its mode: it may be one its
// owner shares on purpose, or /dev/stdout.
func Start(path, service string) (*sdktrace.TracerProvider, func() error, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("-trace: %w", err)
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("-trace: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	)
	stop := func() error {
		err := tp.Shutdown(context.Background())
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil {
			return fmt.Errorf("-trace %s: %w", path, err)
		}
		return nil
	}
	return tp, stop, nil
}
