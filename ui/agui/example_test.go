package agui_test

import (
	"errors"
	"log"
	"net/http"

	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/agui"
)

// A host mounts the handler where its AG-UI client (an HttpAgent) posts its
// runs. The thread id is the session id; Authorize says who asks, and
// refuses whoever does not own the session.
func ExampleNewHandler() {
	var (
		r     *runner.Runner // the host's runner (runner.New): it takes the decisions and answers
		owner func(sessionID string) string
	)
	h, err := agui.NewHandler(ui.Config{
		Runner: r,
		Authorize: func(req *http.Request, sessionID string) (string, error) {
			user := req.Header.Get("X-User") // the host's own authentication
			if user == "" {
				return "", ui.ErrUnauthenticated
			}
			if owner(sessionID) != user {
				return "", errors.New("not your conversation")
			}
			return user, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("POST /api/agui", h)
}
