package mcpclient

import (
	"strings"
	"unicode"
)

// cleanDescription removes from a tool description what a model reads but
// a human reviewing the tool does not see (tool poisoning): control
// characters other than newline and tab, zero-width characters,
// bidirectional overrides and isolates, and Unicode tag characters (which
// spell hidden ASCII).
func cleanDescription(s string) string {
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
		if hiddenRune(r) {
			return -1
		}
		return r
	}, s)
}

func hiddenRune(r rune) bool {
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
