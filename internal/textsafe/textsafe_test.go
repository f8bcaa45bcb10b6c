package textsafe

import "testing"

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\nwith a newline\tand a tab":         "plain text\nwith a newline\tand a tab",
		"zero\u200bwidth \u202eoverride\u2066isolate":   "zerowidth overrideisolate",
		"tags\U000E0049\U000E0047\U000E004E hidden":     "tags hidden",
		"bell\a del\x7f c1\u0085 bom\ufeff soft\u00adh": "bell del c1 bom softh",
		"café ünïcode stays":                            "café ünïcode stays",
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}
