// Package weblink checks a link before a person is asked to open it: its
// host in ASCII as a browser's address bar shows it, nothing in it that
// reads as something it is not. interact checks the URL of a URL-mode
// elicitation with it, and mcpclient the authorization URL of an OAuth
// connect card.
package weblink

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// MaxBytes bounds a link a person is shown, as sent and as shown: 2,048
// bytes. It is the practical limit of links across browsers
// and tools (older browsers and many proxies, sitemaps and link checkers
// stop near 2 KiB), and a link a person is asked to read and consent to
// has no use for more: what a server must pass through it fits in a
// token.
const MaxBytes = 2048

// hostProfile maps a host to ASCII as a browser's address bar does (UTS
// 46 without the transitional mapping, with the bidi and joiner rules),
// allowing "_" and labels such as "r3---sn-x" that browsers allow too.
var hostProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false),
	idna.StrictDomainName(false), idna.CheckHyphens(false))

// Check checks a URL a person is asked to open (a URL-mode elicitation's,
// an authorization server's) and returns it as the person is shown it and
// a browser opens it, and its host: the host in
// ASCII (an international name as punycode, "xn--pple-43d.com" for
// "аpple.com" with a Cyrillic а, as browsers show such a name), the other
// parts with every byte beyond ASCII escaped, so that nothing in it reads
// as something it is not. It refuses what is not an http or https URL
// with a host and no user, a URL longer than [MaxBytes] as sent or once
// made ASCII, and a host with a character a person cannot see (see
// [Invisible]) or a space, with a label IDNA does
// not allow, or that a browser would read as another address than it
// shows ("0x7f.1").
func Check(raw string) (link, host string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("the url %s", fmt.Sprintf(format, args...))
	}
	if len(raw) > MaxBytes {
		return "", "", bad("is longer than %d bytes", MaxBytes)
	}
	if !utf8.ValidString(raw) {
		return "", "", bad("is not UTF-8")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", "", bad("is not an http or https address with a host")
	}
	name := u.Hostname() // unescaped: "%E2%80%8B" is a zero-width space
	if !utf8.ValidString(name) {
		return "", "", bad("has a host that is not UTF-8")
	}
	for _, r := range name {
		if Invisible(r) || unicode.IsSpace(r) {
			return "", "", bad("has a host with a character that is not shown (%U)", r)
		}
	}
	if host, err = asciiHost(name); err != nil {
		return "", "", bad("has a host that is not a domain name or an IP address (%v)", err)
	}
	switch port := u.Port(); {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u.Host = "[" + host + "]"
	default:
		u.Host = host
	}
	u.RawQuery = escapeBeyondASCII(u.RawQuery)
	link = u.String() // the path and the fragment escaped by url
	if len(link) > MaxBytes {
		return "", "", bad("is longer than %d bytes once its host is punycode and its text escaped", MaxBytes)
	}
	return link, host, nil
}

// asciiHost returns name, a URL's host without its port, in ASCII: an IP
// address as it is, a domain name mapped by hostProfile. A name is one DNS
// can hold (labels of 1 to 63 bytes, 253 in all, a final dot aside) of
// labels of letters, digits, "-" and "_", whose last is no number.
func asciiHost(name string) (string, error) {
	if a, err := netip.ParseAddr(name); err == nil {
		return a.String(), nil
	}
	host, err := hostProfile.ToASCII(name)
	if err != nil {
		return "", err
	}
	if host == "" || strings.Trim(host, ".") == "" {
		return "", fmt.Errorf("an empty name")
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "", fmt.Errorf("the character %q", r)
		}
	}
	name = strings.TrimSuffix(host, ".")
	labels := strings.Split(name, ".")
	if len(name) > 253 {
		return "", fmt.Errorf("a name longer than 253 bytes")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("an empty label, or one longer than 63 bytes")
		}
	}
	last := labels[len(labels)-1]
	if strings.HasPrefix(last, "0x") || strings.Trim(last, "0123456789") == "" {
		// A browser reads such a name as an IPv4 address ("0x7f.1",
		// "1.2.3", "010.0.0.1") or refuses it.
		return "", fmt.Errorf("a name that ends in a number")
	}
	return host, nil
}

// escapeBeyondASCII returns s with every byte beyond ASCII, every control
// and the space percent-escaped, as a browser sends them.
func escapeBeyondASCII(s string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > ' ' && c < 0x7f {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(s)+16), s[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	if b == nil {
		return s
	}
	return string(b)
}

// Invisible reports whether r is a character a person does not see, or
// one that changes how the characters around it are shown: a format
// character (Cf: zero-width spaces and joiners, direction marks and
// overrides, the soft hyphen), another default ignorable code point (a
// Hangul filler), a variation selector or a control character.
func Invisible(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Cc, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}
