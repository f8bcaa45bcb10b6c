package a2a

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// fuzzHandler serves two echo agents; runs finish at once, so every request
// the fuzzer invents ends.
func fuzzHandler(f *testing.F) *Handler {
	eng := axocoatl.New(axocoatl.Options{})
	for _, id := range []string{"assistant", "other"} {
		if err := eng.AddAgent(agent.Spec{ID: id}, provider.EchoModel{}); err != nil {
			f.Fatal(err)
		}
	}
	h, err := New(Config{MaxBodyBytes: 64 << 10, MaxTasks: 100})
	if err != nil {
		f.Fatal(err)
	}
	if err := eng.Use(context.Background(), h); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
		_ = eng.Close(ctx)
	})
	return h
}

// checkRPCReply insists on a JSON-RPC 2.0 response object: an id, exactly
// one of result and error, result objects with a kind, error.data an object.
func checkRPCReply(b []byte) error { return checkReply(b, gen03) }

// checkReply is checkRPCReply for generation g: in 1.0 error.data is a list
// and a result is an object without kind (a stream event has one member).
func checkReply(b []byte, g generation) error {
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    *int            `json:"code"`
			Message *string         `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("reply is not UTF-8")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("reply is not a JSON object: %v", err)
	}
	if r.JSONRPC != "2.0" || len(r.ID) == 0 {
		return fmt.Errorf("no jsonrpc or id")
	}
	if (r.Error == nil) == (len(r.Result) == 0) {
		return fmt.Errorf("want exactly one of result and error")
	}
	if r.Error != nil {
		if r.Error.Code == nil || r.Error.Message == nil {
			return fmt.Errorf("error without code or message")
		}
		if g == gen10 {
			if len(r.Error.Data) == 0 || r.Error.Data[0] != '[' {
				return fmt.Errorf("1.0 error.data is not a list")
			}
			return nil
		}
		if len(r.Error.Data) > 0 && r.Error.Data[0] != '{' {
			return fmt.Errorf("error.data is not an object")
		}
		return nil
	}
	if g == gen10 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(r.Result, &obj); err != nil || len(obj) == 0 || obj["kind"] != nil {
			return fmt.Errorf("1.0 result is no object, or has kind")
		}
		return nil
	}
	var k struct{ Kind string }
	if err := json.Unmarshal(r.Result, &k); err != nil || k.Kind == "" {
		return fmt.Errorf("result without kind")
	}
	return nil
}

func FuzzJSONRPC(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"s","method":"message/stream","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"data","data":{"a":[1]}}],"metadata":{"receiver_id":"other"}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x","historyLength":-1}}`))
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, agentID := range []string{"", "other"} {
			w := httptest.NewRecorder()
			path := "/a2a"
			if agentID != "" {
				path = "/a2a/agents/" + agentID
			}
			r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			r.Host = "127.0.0.1" // the guard answers only to this machine's names without a token
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("HTTP %d", w.Code)
			}
			if ct := w.Header().Get("Content-Type"); ct == "text/event-stream" {
				sc := bufio.NewScanner(w.Body)
				n := 0
				for sc.Scan() {
					line := sc.Bytes()
					if len(line) == 0 {
						continue
					}
					data, ok := bytes.CutPrefix(line, []byte("data: "))
					if !ok {
						t.Fatalf("SSE line without data: %q", line)
					}
					if err := checkRPCReply(data); err != nil {
						t.Fatalf("%v: %s", err, data)
					}
					n++
				}
				if err := sc.Err(); err != nil || n == 0 {
					t.Fatalf("SSE stream: %d events, %v", n, err)
				}
				continue
			}
			if err := checkRPCReply(w.Body.Bytes()); err != nil {
				t.Fatalf("%v: %s", err, w.Body.Bytes())
			}
		}
	})
}

// FuzzV1 sends the same body as an A2A 1.0 JSON-RPC request and as a REST
// message:send: every answer is well-formed in its binding's shape.
func FuzzV1(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":[1,{"a":2}]}],"metadata":{"receiver_id":"other"}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1,"pageToken":"3"}}`))
	f.Add([]byte(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk=","mediaType":"text/plain"}]}}`))
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
		r.Host = "127.0.0.1"
		r.Header.Set(HeaderVersion, "1.0")
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("JSON-RPC: HTTP %d", w.Code)
		}
		if w.Header().Get("Content-Type") == "text/event-stream" {
			sc := bufio.NewScanner(w.Body)
			for sc.Scan() {
				if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
					if err := checkReply(data, gen10); err != nil {
						t.Fatalf("%v: %s", err, data)
					}
				}
			}
		} else if err := checkReply(w.Body.Bytes(), gen10); err != nil {
			t.Fatalf("%v: %s", err, w.Body.Bytes())
		}

		w = httptest.NewRecorder()
		r = httptest.NewRequest(http.MethodPost, "/a2a/message:send", bytes.NewReader(body))
		r.Host = "127.0.0.1"
		h.ServeHTTP(w, r)
		var reply struct {
			Task  json.RawMessage `json:"task"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Details []struct {
					Reason string `json:"reason"`
				} `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil || !utf8.Valid(w.Body.Bytes()) {
			t.Fatalf("REST: HTTP %d, body not JSON: %q", w.Code, w.Body.Bytes())
		}
		switch {
		case w.Code == http.StatusOK && len(reply.Task) > 0 && reply.Error == nil:
		case w.Code >= 400 && reply.Error != nil && reply.Error.Code == w.Code && reply.Error.Message != "" &&
			len(reply.Error.Details) == 1 && reply.Error.Details[0].Reason != "":
		default:
			t.Fatalf("REST: HTTP %d, malformed answer %s", w.Code, w.Body.Bytes())
		}
	})
}

func FuzzTasks(f *testing.F) {
	f.Add([]byte(`{"receiver_id":"assistant","input":"hello"}`))
	f.Add([]byte(`{"id":"t1","sender_id":"x","receiver_id":"other","input":{"a":{"b":[1,2]}},"timeout_secs":5}`))
	f.Add([]byte(`{"receiver_id":"nobody","input":"x"}`))
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/a2a/tasks", bytes.NewReader(body))
		r.Host = "127.0.0.1"
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK:
			var res TaskResponse
			if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
				t.Fatalf("200 body: %v: %s", err, w.Body.Bytes())
			}
			ok := res.Status == "completed" && res.Output != nil && res.Error == nil ||
				res.Status == "failed" && res.Output == nil && res.Error != nil
			if !ok || res.ReceiverID == "" {
				t.Fatalf("inconsistent result: %s", w.Body.Bytes())
			}
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%d body: %v: %s", w.Code, err, w.Body.Bytes())
			}
		default:
			t.Fatalf("HTTP %d: %s", w.Code, w.Body.Bytes())
		}
	})
}

func TestDecodeRequestIDs(t *testing.T) {
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":0,"method":"m"}`:                    `0`,
		`{"jsonrpc":"2.0","id":-12.5e3,"method":"m"}`:              `-12.5e3`,
		`{"jsonrpc":"2.0","id":"a\"b","method":"m"}`:               `"a\"b"`,
		`{"jsonrpc":"2.0","id":null,"method":"m"}`:                 `null`,
		`{"jsonrpc":"2.0","id":true,"method":"m"}`:                 `null`,
		`{"jsonrpc":"2.0","id":[1],"method":"m"}`:                  `null`,
		`  {"jsonrpc":"2.0","id":7,"method":"m"}  `:                `7`,
		`{"jsonrpc":"2.0","id":7,"method":"m"} trailing`:           `null`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"m\"}": "\"a\ufffdb\"",
	} {
		req, _ := decodeRequest([]byte(body))
		if string(req.ID) != want {
			t.Errorf("%s: id %s, want %s", body, req.ID, want)
		}
	}
}

func TestChunkAndCut(t *testing.T) {
	s := strings.Repeat("aé€😀", 1000)
	var joined strings.Builder
	for _, c := range chunk(s, 7) {
		if len(c) > 7 || !utf8Valid(c) {
			t.Fatalf("bad chunk %q", c)
		}
		joined.WriteString(c)
	}
	if joined.String() != s {
		t.Fatal("chunks do not rebuild the text")
	}
	if got := cut("a€b", 2); got != "a…" {
		t.Fatalf("cut: %q", got)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
