package httpguard

import (
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

// BaseURL is the absolute URL a handler mounted under a path prefix is
// reached at: the public URL (else scheme://Host of the request) followed by
// the prefix the host's mux stripped (http.StripPrefix leaves RequestURI
// whole, so the prefix is what RequestURI has before the path the handler
// sees). Cards and other absolute URLs are built on it.
func BaseURL(publicURL string, r *http.Request) string {
	base := strings.TrimRight(publicURL, "/")
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + MountPrefix(r)
}

// MountPrefix is the path prefix stripped before r reached the handler, ""
// when none was.
func MountPrefix(r *http.Request) string {
	full := r.RequestURI
	if i := strings.IndexByte(full, '?'); i >= 0 {
		full = full[:i]
	}
	if strings.HasPrefix(full, "http://") || strings.HasPrefix(full, "https://") {
		if u, err := url.Parse(full); err == nil {
			full = u.EscapedPath()
		}
	}
	seen := r.URL.EscapedPath()
	if seen == "" || !strings.HasSuffix(full, seen) {
		return ""
	}
	return strings.TrimRight(full[:len(full)-len(seen)], "/")
}

// RedactURL is how every URL is shown in logs, errors and doctor output:
// scheme, host and path, with userinfo, query and fragment hidden (they
// often carry credentials: https://TOKEN@host, ?api_key=…) and path
// segments that look like keys masked (hosted MCP servers put the account
// key in the path: /mcp/<key>/sse).
func RedactURL(raw string) string {
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

// RedactURLs applies RedactURL to each URL of a comma-separated list (NATS
// server lists).
func RedactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = RedactURL(p)
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
