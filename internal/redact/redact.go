// Package redact is how URLs are shown in logs, errors and doctor output:
// without the parts that carry credentials.
package redact

import (
	"net/url"
	"strings"
	"unicode"
)

// URL is how every URL is shown in logs, errors and doctor output:
// scheme, host and path, with userinfo, query and fragment hidden (they
// often carry credentials: https://TOKEN@host, ?api_key=…) and path
// segments that look like keys masked (hosted MCP servers put the account
// key in the path: /mcp/<key>/sse).
func URL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "[unparsable URL]"
	}
	if u.Scheme == "" || u.Host == "" { // not an absolute URL: show it only if it cannot hide a credential
		if strings.ContainsAny(raw, "@?#") {
			return "[redacted URL]"
		}
		return strings.TrimSpace(raw)
	}
	out := u.Scheme + "://"
	if u.User != nil {
		out += "[redacted]@"
	}
	out += u.Host
	segs := strings.Split(u.EscapedPath(), "/")
	for i, seg := range segs {
		if CredentialLike(seg) {
			segs[i] = "[redacted]"
		}
	}
	out += strings.Join(segs, "/")
	if u.RawQuery != "" || u.ForceQuery {
		out += "?[redacted]"
	}
	return out
}

// URLs applies URL to each URL of a comma-separated list (NATS
// server lists).
func URLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = URL(p)
	}
	return strings.Join(parts, ",")
}

// CredentialLike reports whether a URL path segment may be a key: at least
// 16 characters mixing letters and digits (an API key, a UUID), where the
// words of a route (mcp, sse, v1, streamable-http) are short or have no
// digits. A false positive only hides a harmless segment.
func CredentialLike(seg string) bool {
	if len(seg) < 16 {
		return false
	}
	letter := strings.IndexFunc(seg, unicode.IsLetter) >= 0
	digit := strings.IndexFunc(seg, unicode.IsDigit) >= 0
	return letter && digit
}
