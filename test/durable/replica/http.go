package main

import (
	"errors"
	"net/http"
	"slices"

	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/httpjson"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/jsonapi"
)

// routes serves ui/jsonapi under /api (a front end's requests: send,
// events, history, decide, answer, stop) and the test-only reads of the
// store beside it.
func (r *replica) routes() (http.Handler, error) {
	api, err := jsonapi.NewHandler(ui.Config{Runner: r.runner, Authorize: r.authorize, Logger: r.log}, jsonapi.Options{})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", api))
	mux.HandleFunc("GET /calls", r.handleCalls)
	mux.HandleFunc("GET /approvals", r.handleApprovals)
	mux.HandleFunc("GET /approval", r.handleApproval)
	mux.HandleFunc("GET /forms", r.handleForms)
	mux.HandleFunc("GET /healthz", r.handleHealth)
	return mux, nil
}

// authorize lets every caller act on every session (a test's), as the
// replica's holder: the audit records which replica took a decision.
func (r *replica) authorize(*http.Request, string) (string, error) { return r.opts.holder, nil }

func (r *replica) handleCalls(w http.ResponseWriter, req *http.Request) {
	calls, err := r.store.OpenCalls(req.Context(), req.URL.Query().Get("session"))
	answer(w, calls, err)
}

// handleApprovals lists the session's pending approvals (memory.Approval,
// whose Digest a decision names), without its forms (see /forms).
func (r *replica) handleApprovals(w http.ResponseWriter, req *http.Request) {
	as, err := r.store.PendingApprovals(req.Context(), req.URL.Query().Get("session"))
	answer(w, slices.DeleteFunc(as, func(a memory.Approval) bool { return a.Kind == memory.KindForm }), err)
}

// handleForms lists the session's open forms (interact.PendingForm), as a
// reconnecting front end draws them (runner.Runner.Pending).
func (r *replica) handleForms(w http.ResponseWriter, req *http.Request) {
	list, err := r.runner.Pending(req.Context(), req.URL.Query().Get("session"))
	forms := []interact.PendingForm{}
	for _, a := range list {
		if a.Form != nil {
			forms = append(forms, *a.Form)
		}
	}
	answer(w, forms, err)
}

func (r *replica) handleApproval(w http.ResponseWriter, req *http.Request) {
	a, err := r.store.GetApproval(req.Context(), req.URL.Query().Get("id"))
	answer(w, a, err)
}

func (r *replica) handleHealth(w http.ResponseWriter, _ *http.Request) {
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "holder": r.opts.holder, "sweeps": r.sweeps.Load()})
}

// answer writes v, or err as 404 (memory.ErrNotFound) or 500.
func answer(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, memory.ErrNotFound):
		httpjson.WriteError(w, http.StatusNotFound, err.Error())
	case err != nil:
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
	default:
		httpjson.WriteJSON(w, http.StatusOK, v)
	}
}
