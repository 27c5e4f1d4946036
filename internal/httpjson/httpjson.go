// Package httpjson reads the JSON bodies of the SDK's HTTP handlers
// (approval's and interact's) and writes their answers, so that every
// handler refuses the same bad requests with the same statuses and words.
package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
)

// IsJSON reports whether contentType, a Content-Type header, says
// application/json (parameters such as charset are allowed).
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// Decode reads r's body, exactly one JSON value of at most limit bytes, into
// v. It refuses a method other than POST (405), a body that is not JSON by its
// Content-Type (415), too large (413), late (408, when the server set a read
// deadline), empty or malformed (400). On failure it writes the answer with
// WriteError and returns false.
func Decode(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed, use POST")
		return false
	}
	if !IsJSON(r.Header.Get("Content-Type")) {
		WriteError(w, http.StatusUnsupportedMediaType, "the request body must be JSON (Content-Type: application/json)")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	err := dec.Decode(v)
	if err == nil {
		// Exactly one JSON value: anything after it is malformed.
		switch _, terr := dec.Token(); {
		case terr == io.EOF:
			return true
		case errors.As(terr, new(*http.MaxBytesError)):
			err = terr
		default:
			err = errors.New("unexpected data after the JSON object")
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		WriteError(w, http.StatusRequestTimeout, "the request body did not arrive in time")
	case errors.Is(err, io.EOF):
		WriteError(w, http.StatusBadRequest, "empty request body")
	default:
		WriteError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
	}
	return false
}

// WriteError answers {"success":false,"error":msg} with status: the JSON of
// the answers of the handlers of package ui.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, struct {
		Success bool   `json:"success"`
		Error   string `json:"error,omitempty"`
	}{Error: msg})
}

// WriteJSON answers v as JSON with status, marked so that no browser takes
// it for anything else.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}
