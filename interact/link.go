package interact

import (
	"fmt"

	"github.com/planround/planround/internal/weblink"
)

// MaxURLBytes bounds the URL of a URL-mode elicitation, as sent and as
// shown: 2,048 bytes. It is the practical limit of links across browsers
// and tools (older browsers and many proxies, sitemaps and link checkers
// stop near 2 KiB), and a link a person is asked to read and consent to
// has no use for more: what a server must pass through it fits in a
// token.
const MaxURLBytes = weblink.MaxBytes

// checkLink checks the URL of a URL-mode elicitation and returns it as a
// person is shown it and a browser opens it, and its host in ASCII (see
// weblink.Check); what it refuses wraps [ErrInvalidForm].
func checkLink(raw string) (link, host string, err error) {
	link, host, err = weblink.Check(raw)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrInvalidForm, err)
	}
	return link, host, nil
}
