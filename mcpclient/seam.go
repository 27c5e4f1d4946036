package mcpclient

import (
	"context"
	"encoding/json"

	"github.com/planround/planround/agent"
)

// instance is one running MCP server: a connected client (and for stdio its process group).
type instance interface {
	call(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error)
	close() error // ends the connection and, for stdio, kills the whole process group; idempotent
	pid() int     // the stdio server's process id (0 for a remote server)
}

// starter starts a fresh instance of one server configuration.
type starter func(ctx context.Context) (instance, error)
