package approvaltest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval/approvaltest"
)

// webhook is an Approver that asks a remote service over HTTP, as a
// chat-ops bot would: with http.DefaultClient when client is nil. Its
// connections stay in the client's pool between calls.
type webhook struct {
	url    string
	client *http.Client
}

// CloseIdleConnections closes the idle connections of w's own client.
func (w webhook) CloseIdleConnections() {
	if w.client != nil {
		w.client.CloseIdleConnections()
	}
}

// Request returns a pending ticket: the service is asked when the agent
// waits, after the approval card was shown.
func (w webhook) Request(_ context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	return agent.Pending("", func(ctx context.Context) (agent.Decision, error) { return w.ask(ctx, req) }), nil
}

func (w webhook) ask(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	body, err := json.Marshal(req.Call)
	if err != nil {
		return agent.Decision{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return agent.Decision{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	client := w.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return agent.Decision{}, fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	var d agent.Decision
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return agent.Decision{}, fmt.Errorf("webhook: %w", err)
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained so the connection is reused
	return d, nil
}

// TestRunWithHTTPClients: an approver that posts to a real server on
// 127.0.0.1 passes the suite, with http.DefaultClient and with its own client
// whose idle connections it closes on request: the keep-alive connections
// left in a pool are not a leak.
func TestRunWithHTTPClients(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var call agent.ToolCall
		if err := json.NewDecoder(r.Body).Decode(&call); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(agent.Decision{Reason: "nobody approves " + call.ID}) //nolint:errcheck // test server
	}))
	defer srv.Close()
	t.Run("DefaultClient", func(t *testing.T) {
		approvaltest.Run(t, func() agent.Approver { return webhook{url: srv.URL} })
	})
	t.Run("OwnClient", func(t *testing.T) {
		approvaltest.Run(t, func() agent.Approver {
			return webhook{url: srv.URL, client: &http.Client{Transport: &http.Transport{}}}
		})
	})
}
