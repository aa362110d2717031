package redact

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://user:secret@10.0.0.5:8080/v1/chat/completions": dial tcp 10.0.0.5:8080: connect: connection refused`:    `Post "<url>": dial tcp <address>: connect: connection refused`,
		`Get "https://gpu-3.internal:8443/v1/models?token=x": dial tcp: lookup gpu-3.internal on 127.0.0.53:53: no such host`: `Get "<url>": dial tcp: lookup <address> on <address>: no such host`,
		`dial tcp [fd00::5]:11434: i/o timeout`:                    `dial tcp <address>: i/o timeout`,
		`dial tcp gpu-3:8080: connect: connection refused`:         `dial tcp <address>: connect: connection refused`,
		`engine answered 400: model "m" not found, try ollama://x`: `engine answered 400: model "m" not found, try <url>`,
		`no label has any probability; 3 of 4 options`:             `no label has any probability; 3 of 4 options`,
		// A node's certificate that does not fit the name it was dialled
		// by: Go's x509.HostnameError names both.
		`Post "https://gpu-2.internal:8443/v1/chat/completions": tls: failed to verify certificate: x509: certificate is valid for gpu-1.internal, *.gpu.corp.example, not gpu-2.internal`: `Post "<url>": tls: failed to verify certificate: x509: certificate is valid for <address>, not <address>`,
		`tls: failed to verify certificate: x509: certificate is valid for fd00::1, not fd00::5; question q2: no answer`:                                                                   `tls: failed to verify certificate: x509: certificate is valid for <address>, not <address>; question q2: no answer`,
		`tls: failed to verify certificate: x509: certificate is not valid for any names, but wanted to match gpu-2.internal`:                                                              `tls: failed to verify certificate: x509: certificate is not valid for any names, but wanted to match <address>`,
		`tls: failed to verify certificate: x509: certificate is valid for 120 names, but none matched gpu-2.internal`:                                                                     `tls: failed to verify certificate: x509: certificate is valid for 120 names, but none matched <address>`,
		`tls: failed to verify certificate: x509: cannot validate certificate for fd00::5 because it doesn't contain any IP SANs`:                                                          `tls: failed to verify certificate: x509: cannot validate certificate for <address> because it doesn't contain any IP SANs`,
		``: ``,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

// No URL survives, whatever the text around it.
func FuzzText(f *testing.F) {
	f.Add("x", "u:p@10.1.2.3:80/a", "y")
	f.Add("(", "host", ")")
	f.Fuzz(func(t *testing.T, before, rest, after string) {
		if rest == "" || strings.ContainsAny(rest, " \t\n\r\f\"'<>`") {
			return
		}
		secret := "http://" + rest
		got := Text(before + secret + " " + after)
		if strings.Contains(got, secret) {
			t.Fatalf("%q survives in %q", secret, got)
		}
	})
}
