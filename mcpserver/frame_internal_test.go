package mcpserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// requestIDByMap is requestID as it was, decoding the whole frame into a
// map: memberValue must find the same id without that.
func requestIDByMap(frame []byte) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) != nil {
		return nil
	}
	id := m["id"]
	if len(id) == 0 {
		return nil
	}
	switch id[0] {
	case '"':
		return id
	case 'n', 't', 'f', '{', '[':
		return nil
	}
	if _, err := strconv.ParseFloat(string(id), 64); err != nil {
		return nil
	}
	return id
}

// The stdio fuzz corpus, and frames made to trip a scanner, give the same
// id both ways.
func TestRequestIDMatchesMapDecoding(t *testing.T) {
	frames := []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"id":1,"id":2}`, `{"id":"a","x":{"id":3}}`, `{"x":["id",{"id":4}],"id":5}`,
		`{"i\u0064":6}`, `{"\u0069\u0064":"seven"}`, `{"ID":8}`, `{"Id":9,"id":10}`,
		`{ "id" : -11 , "m" : "x" }`, "{\n\t\"id\":\r12\n}", `{"s":"a\"b\\","id":13}`,
		`{"id":null}`, `{"id":true}`, `{"id":{"a":1}}`, `{"id":[1]}`, `{"id":1e400}`, `{"id":1.5e3}`,
		`{}`, `[]`, `[{"id":1}]`, `"id"`, `null`, `3`, `{"a":"}","id":14}`, `{"a":"\\","id":15}`,
		`{"id":"\ud800"}`, `{"\/id":16}`, `{"i\/d":17,"id":18}`,
	}
	files, _ := filepath.Glob("testdata/fuzz/FuzzStdioLine/*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// go test fuzz v1 / []byte("…"): the one value of the file.
		for _, line := range strings.Split(string(b), "\n") {
			if s, ok := strings.CutPrefix(line, "[]byte("); ok {
				if v, err := strconv.Unquote(strings.TrimSuffix(s, ")")); err == nil {
					frames = append(frames, v)
				}
			}
		}
	}
	checked := 0
	for _, f := range frames {
		frame := []byte(strings.TrimSpace(f))
		if !json.Valid(frame) {
			continue
		}
		checked++
		if got, want := requestID(frame), requestIDByMap(frame); string(got) != string(want) {
			t.Errorf("%s: id %s, decoding into a map gives %s", f, got, want)
		}
	}
	if checked < 30 {
		t.Fatalf("only %d valid frames checked", checked)
	}
}

// Run: go test -run '^$' -fuzz FuzzRequestID ./mcpserver/
func FuzzRequestID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	f.Add([]byte(`{"a":"\"}","id":"x\\"}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if !json.Valid(frame) {
			return
		}
		if got, want := requestID(frame), requestIDByMap(frame); string(got) != string(want) {
			t.Errorf("%q: id %s, decoding into a map gives %s", frame, got, want)
		}
	})
}
