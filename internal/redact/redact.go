// Package redact takes network addresses out of text a caller will read:
// error messages of engines and of Go's HTTP client name the URLs (with
// any user name and password in them) and addresses of the nodes behind
// system1, which are its operator's business, not its callers'.
package redact

import "regexp"

var rules = []struct {
	re   *regexp.Regexp
	with string
}{
	// A URL of any scheme, user info and query included.
	{regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^\s"'<>` + "`" + `]+`), "<url>"},
	// Host names as Go's resolver and dialer report them.
	{regexp.MustCompile(`\b(lookup|dial (?:tcp|udp)[46]?) [^\s:\[]+(:\d+)?`), "$1 <address>"},
	// The names a node's certificate holds and the one it was dialled by,
	// as Go's x509.HostnameError gives them.
	{regexp.MustCompile(`(certificate is valid for )[0-9A-Za-z._:%*, -]*?, not [0-9A-Za-z._:%*-]+`), "${1}<address>, not <address>"},
	{regexp.MustCompile(`(but (?:none matched|wanted to match) |cannot validate certificate for )[0-9A-Za-z._:%*-]+`), "${1}<address>"},
	// IPv6 in brackets, and IPv4, each with or without a port.
	{regexp.MustCompile(`\[[0-9A-Fa-f:.%]*:[0-9A-Fa-f:.%]*\](:\d+)?`), "<address>"},
	{regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(:\d+)?\b`), "<address>"},
}

// Text returns s with every URL replaced by <url> and every IP address,
// and every host name that Go's resolver, dialer or certificate check
// names, by <address>.
func Text(s string) string {
	for _, r := range rules {
		s = r.re.ReplaceAllString(s, r.with)
	}
	return s
}
