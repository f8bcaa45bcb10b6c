package axocoatl

import (
	"encoding/json"
	"testing"
)

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "\x00\x01\x1f\x7f", "tab\tnew\nline\r\b\f", "héllo wörld ☃ 🦎", "\u2028\u2029", "bad \xff\xfe utf8 \xc3", "\xed\xa0\x80 surrogate"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("appendJSONString(%q) = %s, json.Marshal = %s", s, got, want)
		}
	})
}

func TestPayloadMatchesEncodingJSON(t *testing.T) {
	p := newPayload()
	got := p.str("agent_id", "a<b").int("duration_ms", -42).bool("ok", true).str("error", "x\"y").done()
	want, _ := json.Marshal(struct {
		AgentID    string `json:"agent_id"`
		DurationMS int64  `json:"duration_ms"`
		OK         bool   `json:"ok"`
		Error      string `json:"error"`
	}{"a<b", -42, true, "x\"y"})
	if string(got) != string(want) {
		t.Fatalf("got %s, want %s", got, want)
	}
	empty := newPayload()
	if string(empty.done()) != "{}" {
		t.Fatal("empty payload")
	}
}
