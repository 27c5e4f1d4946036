// Package names checks the short names the SDK takes from its callers and
// passes on (a response format's name, an approval id): they go into JSON
// requests, URLs, notes between processes and log lines as they are.
package names

// Valid reports whether s is 1 to max bytes of ASCII letters, digits, '-'
// and '_'.
func Valid(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
