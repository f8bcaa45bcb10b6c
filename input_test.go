package axocoatl

import (
	"encoding/json"
	"errors"
	"testing"
)

// slowInput is what ParseInput answers without its fast path: the schema
// read with encoding/json, the key exact and a string (null is none).
func slowInput(args []byte) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return "", false
	}
	var in *string
	if json.Unmarshal(obj["input"], &in) != nil || in == nil {
		return "", false
	}
	return *in, true
}

var inputCases = []string{
	`{"input":"hi"}`,
	` { "input" : "hi there" } `,
	"{\n\t\"input\":\r\n\"ünïcödé ✓\"}",
	`{"input":""}`,
	`{"input":"a\"b"}`,       // escape: encoding/json's
	`{"input":"a\nb"}`,       // escaped newline
	`{"input":"tab	inside"}`, // raw control character: invalid JSON
	`{"input":"\u00e9"}`,
	"{\"input\":\"\xff\xfe\"}", // invalid UTF-8: encoding/json replaces it
	`{"input":"x","other":1}`,
	`{"other":1,"input":"x"}`,
	`{"INPUT":"x"}`, // the key is exact (encoding/json's struct fields are not)
	`null`,
	` null `,
	`{"input":null,"input":"x"}`,
	`{"input":"x","input":null}`,
	`{"input":"x","input":"y"}`,
	`{"input":"x"} trailing`,
	`{"input":"x"}}`,
	`{"input":"x"`,
	`{"input":"x`,
	`{"input":1}`,
	`{"input":null}`,
	`{}`,
	`[]`,
	``,
	`{"input":"x"}` + "\x00",
	`{"input" "x"}`,
}

// The fast path of ParseInput answers exactly what encoding/json does, or
// leaves the case to it; every refusal is ErrBadInput.
func TestPlainInputMatchesEncodingJSON(t *testing.T) {
	fast := 0
	for _, c := range inputCases {
		checkInput(t, []byte(c))
		if _, ok := plainInput([]byte(c)); ok {
			fast++
		}
	}
	if fast != 4 {
		t.Errorf("the fast path took %d cases, want the 4 plain ones", fast)
	}
}

func FuzzParseInput(f *testing.F) {
	for _, c := range inputCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, args []byte) { checkInput(t, args) })
}

func checkInput(t *testing.T, args []byte) {
	t.Helper()
	want, wantOK := slowInput(args)
	got, err := ParseInput(args)
	if (err == nil) != wantOK || got != want {
		t.Errorf("ParseInput(%q) = %q, %v; encoding/json: %q, ok %v", args, got, err, want, wantOK)
	}
	if err != nil && !errors.Is(err, ErrBadInput) {
		t.Errorf("ParseInput(%q): %v is not ErrBadInput", args, err)
	}
	if s, ok := plainInput(args); ok && (!wantOK || s != want) {
		t.Errorf("plainInput(%q) = %q; encoding/json: %q, ok %v", args, s, want, wantOK)
	}
}
