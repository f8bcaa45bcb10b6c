// Package httpheader checks the static headers a config sets.
package httpheader

import (
	"fmt"
	"strings"
)

// Problem says what is wrong with a static header a config sets
// (its name not an HTTP field name, or its value holding a CR, LF or NUL
// that would split or cut the request), or "" when nothing is. The value
// is never quoted: it may be a secret.
func Problem(name, value string) string {
	if !ValidName(name) {
		return fmt.Sprintf("invalid header name %q", name)
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return fmt.Sprintf("value of %q contains a control character", name)
	}
	return ""
}

// ValidName reports whether k is an HTTP field name (RFC 9110 token
// characters), for configs that set static headers.
func ValidName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}
