// Package textsafe cleans text that a peer wrote and a model will read (tool
// descriptions of MCP servers, A2A agent cards) of what a human reviewing
// it would not see, and cuts text to a bound without splitting a rune.
package textsafe

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean removes from s what a model reads but a human reviewing a tool
// does not see (tool poisoning): control characters other than newline and
// tab, zero-width characters, bidirectional overrides and isolates, and
// Unicode tag characters (which spell hidden ASCII).
func Clean(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			clean = false
			break
		}
	}
	if clean { // the common case: printable ASCII, no copy
		return s
	}
	return strings.Map(func(r rune) rune {
		if Hidden(r) {
			return -1
		}
		return r
	}, s)
}

// Hidden reports whether r is one of the characters Clean removes.
func Hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.IsControl(r): // C0, DEL, C1
		return true
	case r >= 0x200B && r <= 0x200F, // zero-width space, joiners, LRM, RLM
		r >= 0x202A && r <= 0x202E, // bidi embeddings and overrides
		r >= 0x2060 && r <= 0x2064, // word joiner, invisible operators
		r >= 0x2066 && r <= 0x2069, // bidi isolates
		r == 0x061C, r == 0x180E, r == 0xFEFF, r == 0x00AD,
		r >= 0xE0000 && r <= 0xE007F: // tag characters
		return true
	}
	return false
}

// Cut is s cut to at most n bytes on a UTF-8 boundary (a rune is never
// split; s itself when it fits).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
