package textsafe

import (
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h"}, // é is 2 bytes: never split
		{"héllo", 3, "hé"},
		{"日本", 2, ""},
		{"", 0, ""},
		{"abc", 0, ""},
	} {
		if got := Cut(c.s, c.n); got != c.want || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
