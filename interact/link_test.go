package interact

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestElicitURLHost: a URL-mode request is shown with its host in ASCII,
// an international name as punycode (so that "аpple.com" with a Cyrillic
// а does not read as apple.com), and with a URL whose every part is ASCII
// and opens where the host says; a host with a character a person cannot
// see, and a URL beyond MaxURLBytes, are refused.
func TestElicitURLHost(t *testing.T) {
	for _, tc := range []struct {
		url, link, host string
	}{
		{"https://pay.example.com:8443/link?x=1", "https://pay.example.com:8443/link?x=1", "pay.example.com"},
		{"https://\u0430pple.com/login", "https://xn--pple-43d.com/login", "xn--pple-43d.com"},
		{"https://\u0430\u0440\u0440\u04cf\u0435.com/", "https://xn--80ak6aa92e.com/", "xn--80ak6aa92e.com"},
		{"https://b\u00fccher.example/", "https://xn--bcher-kva.example/", "xn--bcher-kva.example"},
		{"https://B\u00dcCHER.example:443/", "https://xn--bcher-kva.example:443/", "xn--bcher-kva.example"},
		{"https://xn--pple-43d.com/", "https://xn--pple-43d.com/", "xn--pple-43d.com"},
		{"https://ｅｘａｍｐｌｅ.com/", "https://example.com/", "example.com"},
		{"https://Example.COM/A?q=\u00e9t\u00e9#fr\u00e4g", "https://example.com/A?q=%C3%A9t%C3%A9#fr%C3%A4g", "example.com"},
		{"https://example.com/p\u00e4th/\u202egnp.exe", "https://example.com/p%C3%A4th/%E2%80%AEgnp.exe", "example.com"},
		{"https://example.com/?note=\u202efdp.exe", "https://example.com/?note=%E2%80%AEfdp.exe", "example.com"},
		{"http://127.0.0.1:8080/cb", "http://127.0.0.1:8080/cb", "127.0.0.1"},
		{"http://[::1]/cb", "http://[::1]/cb", "::1"},
		{"https://r3---sn-ab5l6n7s.googlevideo.com/x", "https://r3---sn-ab5l6n7s.googlevideo.com/x", "r3---sn-ab5l6n7s.googlevideo.com"},
		{"https://my_host.example.com/", "https://my_host.example.com/", "my_host.example.com"},
		{"https://example.com./", "https://example.com./", "example.com."},
	} {
		got, err := PrepareElicitation(ElicitationRequest{Mode: ModeURL, URL: tc.url})
		if assert.NoError(t, err, "%q", tc.url) {
			assert.Equal(t, tc.link, got.URL, "the link of %q", tc.url)
			assert.Equal(t, tc.host, got.Host, "the host of %q", tc.url)
		}
	}

	long := "https://example.com/?q=" + strings.Repeat("a", MaxURLBytes)
	for _, bad := range []string{
		"https://app\u200ble.com/", "https://app\u200cle.com/", "https://app\u200dle.com/", "https://apple.com\u202e/",
		"https://\u202eelppa.com/", "https://\u2066apple.com/", "https://app\u00adle.com/", "https://apple\ufeff.com/",
		"https://apple\u2060.com/", "https://app\u034fle.com/", "https://apple\ufe0f.com/", "https://app%E2%80%8Ble.com/",
		"https://app%C2%ADle.com/", "https://apple\u3000.com/", "https://apple\u00a0.com/", "https://app\u0085le.com/",
		"https://apple.com\u061c/", "https://apple\u200e.com/", "https://\u3164.com/",
		long[:MaxURLBytes+1], "https://" + strings.Repeat("\u0430", 60) + ".com/", "https://" + strings.Repeat("a", 64) + ".com/",
		"https://" + strings.Repeat("abcdefgh.", 32) + "com/",
		"https://example.com/" + strings.Repeat("\u00e9", MaxURLBytes/3),
		"https://0x7f.1/", "https://1.2.3/", "https://010.0.0.1/", "https://example.123/",
		"https://xn--apple-.com/", "https://xn--ls8h.la/\x00", "https://a..b/", "https://./", "https://ex!ample.com/",
		"javascript:alert(1)", "https://user:pw@example.com/", "https:example.com", "ftp://example.com/", "https:///x",
	} {
		got, err := PrepareElicitation(ElicitationRequest{Mode: ModeURL, URL: bad})
		assert.ErrorIs(t, err, ErrInvalidForm, "%q shown as %q on %q", bad, got.URL, got.Host)
	}
	_, err := PrepareElicitation(ElicitationRequest{Mode: ModeURL, URL: long[:MaxURLBytes]})
	assert.NoError(t, err, "a URL of MaxURLBytes")
}

// FuzzCheckLink: any URL a server sends is refused with ErrInvalidForm or
// becomes a link that is ASCII without spaces or controls, within
// MaxURLBytes, an http or https URL whose host is the host shown (ASCII
// letters, digits, "-", "_" and dots, or an IP address), and that reads
// the same when checked again; never a panic.
func FuzzCheckLink(f *testing.F) {
	for _, seed := range []string{
		"https://pay.example.com:8443/link?x=1", "https://\u0430pple.com/", "https://app\u200ble.com/",
		"https://b\u00fccher.example/p\u00e4th?q=\u00e9#\u00e4", "http://[fe80::1%25eth0]:80/", "http://127.0.0.1/",
		"https://xn--pple-43d.com/", "https://0x7f.1/", "https://example.com/?q=%ZZ", "https://%E2%80%8B.com/",
		"https://ex ample.com/", "https://example.com:99999/", "https://[::ffff:1.2.3.4]/", "HTTPS://EXAMPLE.COM",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		link, host, err := checkLink(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidForm) {
				t.Fatalf("checkLink(%q): error %v does not wrap ErrInvalidForm", raw, err)
			}
			return
		}
		if len(link) > MaxURLBytes {
			t.Fatalf("checkLink(%q) = %d bytes", raw, len(link))
		}
		for i := 0; i < len(link); i++ {
			if link[i] <= ' ' || link[i] >= 0x7f {
				t.Fatalf("checkLink(%q) = %q, with the byte %#x", raw, link, link[i])
			}
		}
		u, err := url.Parse(link)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
			t.Fatalf("checkLink(%q) = %q, which parses as %+v, %v", raw, link, u, err)
		}
		if u.Hostname() != host {
			t.Fatalf("checkLink(%q) = %q on %q, whose host is %q", raw, link, host, u.Hostname())
		}
		if !strings.Contains(host, ":") {
			for _, r := range host {
				if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
					t.Fatalf("checkLink(%q) shows the host %q", raw, host)
				}
			}
		}
		again, host2, err := checkLink(link)
		if err != nil || again != link || host2 != host {
			t.Fatalf("checkLink(%q) = %q on %q, but checked again %q on %q, %v", raw, link, host, again, host2, err)
		}
	})
}
