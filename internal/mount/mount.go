// Package mount finds where a handler is mounted: the path prefix the
// host's mux stripped, and the absolute base URL it is reached at.
package mount

import (
	"net/http"
	"net/url"
	"strings"
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
	return base + Prefix(r)
}

// Prefix is the path prefix stripped before r reached the handler, ""
// when none was.
func Prefix(r *http.Request) string {
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
