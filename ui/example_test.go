package ui_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/planround/planround/ui"
)

// Authorize binds a handler to the host's notion of who owns a session:
// here a cookie that must name the session's owner. A request without the
// cookie gets 401, one of another owner 403; the principal Authorize
// returns is who decides, as the audit records it. A host's own handler
// that acts on a session checks its caller the same way.
func ExampleAuthorizeFunc_Check() {
	owners := map[string]string{"s1": "alice"} // session -> owner, kept by the host
	authorize := ui.AuthorizeFunc(func(r *http.Request, sessionID string) (string, error) {
		c, err := r.Cookie("owner")
		if err != nil {
			return "", fmt.Errorf("%w: no owner cookie", ui.ErrUnauthenticated)
		}
		if owners[sessionID] != c.Value {
			return "", errors.New("not your session")
		}
		return c.Value, nil
	})
	stop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := authorize.Check(w, r, r.FormValue("session"))
		if !ok {
			return // answered
		}
		fmt.Fprintf(w, "stopped by %s\n", who)
	})
	for _, owner := range []string{"", "mallory", "alice"} {
		r := httptest.NewRequest("POST", "/stop?session=s1", nil)
		if owner != "" {
			r.AddCookie(&http.Cookie{Name: "owner", Value: owner})
		}
		rec := httptest.NewRecorder()
		stop.ServeHTTP(rec, r)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// 401 {"success":false,"error":"ui: not authenticated: no owner cookie"}
	// 403 {"success":false,"error":"not your session"}
	// 200 stopped by alice
}
