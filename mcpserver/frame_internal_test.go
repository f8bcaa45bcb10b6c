package mcpserver

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
	frames = append(frames, stdioCorpus(t)...)
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

// stdioCorpus is the stdio fuzz corpus: the one value of each file.
func stdioCorpus(t testing.TB) []string {
	var frames []string
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
	return frames
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

// scanMatches checks scanFrame's one pass against what it replaces:
// json.Valid for validity, the map decoding for the id (and whether there
// is one), and the go-sdk's DecodeMessage for the message it builds.
func scanMatches(t *testing.T, frame []byte) {
	t.Helper()
	info, ok := scanFrame(frame, frameLimits{})
	if ok != json.Valid(frame) {
		t.Fatalf("%q: scanFrame says valid=%v, json.Valid %v", frame, ok, !ok)
	}
	if !ok {
		return
	}
	if got, want := idLiteral(info.id), requestIDByMap(frame); string(got) != string(want) {
		t.Errorf("%q: id %s, decoding into a map gives %s", frame, got, want)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) == nil {
		if _, has := m["id"]; has != info.hasID {
			t.Errorf("%q: hasID %v, the map decoding says %v", frame, info.hasID, has)
		}
	}
	got, gerr := info.decode(frame)
	want, werr := jsonrpc.DecodeMessage(frame)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: decode error %v, DecodeMessage's %v", frame, gerr, werr)
	}
	if gerr == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%q: decode gives %#v, DecodeMessage %#v", frame, got, want)
	}
}

// The one scan that replaced json.Valid, DecodeMessage and requestID reads
// every frame of the corpus as they did.
func TestScanFrameMatchesDecoders(t *testing.T) {
	frames := []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
		`{"jsonrpc":"2.0","id":1,"method":"p\u0069ng"}`, `{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"\u00e9","method":"ping"}`, "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-0,"method":"ping"}`, `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","error":5}`, `{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":null}`, `{"jsonrpc":"2.0","id":1,"method":5}`, `{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2\u002e0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`, `{"jsonrpc":"2.0","id":1,"method":"ping","params":[1, 2]}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":1}},"params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"x"}`, `{"jsonrpc":"2.0","id":1,"method":"ping"} x`,
		`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `[1,]`, `{"a":1,}`, `tru`, `nul`,
	}
	for _, f := range append(frames, stdioCorpus(t)...) {
		scanMatches(t, []byte(strings.TrimSpace(f)))
	}
}

// Run: go test -run '^$' -fuzz FuzzScanFrame ./mcpserver/
func FuzzScanFrame(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"x"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a\"b","method":"ping","params":[1,{"a":null}]}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		scanMatches(t, bytes.TrimSpace(frame))
	})
}

// The progress token and _meta are those of the last params, as a decoder
// takes them.
func TestScanFrameMeta(t *testing.T) {
	for _, c := range []struct{ frame, meta, token string }{
		{`{"params":{"_meta":{"progressToken":"p"}}}`, `{"progressToken":"p"}`, `"p"`},
		{`{"params":{"_meta":{"progressToken":"p"}},"params":{}}`, ``, ``},
		{`{"params":{"_meta":{"progressToken":"p"},"_meta":{"x":1}}}`, `{"x":1}`, ``},
		{`{"params":{"a":{"_meta":{"progressToken":"p"}}}}`, ``, ``},
		{`{"x":{"params":{"_meta":{"progressToken":"p"}}}}`, ``, ``},
		{`{"params":{"_meta":{"a":{"progressToken":"p"}}}}`, `{"a":{"progressToken":"p"}}`, ``},
	} {
		info, ok := scanFrame([]byte(c.frame), frameLimits{})
		if !ok || string(info.meta) != c.meta || string(info.progressToken) != c.token {
			t.Errorf("%s: meta %s token %s (ok %v), want %s and %s", c.frame, info.meta, info.progressToken, ok, c.meta, c.token)
		}
	}
}

// The bounds of max_message_values and max_message_depth: a message at
// the bound passes, one value or level more does not.
func TestScanFrameLimits(t *testing.T) {
	lim := frameLimits{values: 5, depth: 3}
	for _, c := range []struct {
		frame            string
		tooMany, tooDeep bool
	}{
		{`{"a":1,"b":[2,3]}`, false, false}, // object, a, b, 2, 3
		{`{"a":1,"b":[2,3,4]}`, true, false},
		{`{"a":{"b":[1]}}`, false, false},
		{`{"a":{"b":[[1]]}}`, false, true},
		{`{"a":{"b":[[1]]},"c":[{"d":{"e":1}}]}`, true, true},
	} {
		info, ok := scanFrame([]byte(c.frame), lim)
		if !ok || info.tooMany != c.tooMany || info.tooDeep != c.tooDeep {
			t.Errorf("%s: tooMany %v tooDeep %v (ok %v), want %v %v", c.frame, info.tooMany, info.tooDeep, ok, c.tooMany, c.tooDeep)
		}
	}
	// Past the depth bound the rest is still validated.
	if _, ok := scanFrame([]byte(`{"a":{"b":[[1,]]}}`), lim); ok {
		t.Error("invalid JSON past the depth bound taken for valid")
	}
}
