package a2a_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// a2aJSPackage is the pinned @a2a-js/sdk (A2A 1.0 by default since 1.0.0);
// .ci/run warms npm's cache with it.
const a2aJSPackage = "@a2a-js/sdk@1.3.0"

// The ts-proto TaskState numbers @a2a-js/sdk reports.
const (
	jsSubmitted = 1
	jsWorking   = 2
	jsCompleted = 3
	jsCanceled  = 5
)

type jsReport struct {
	ProtocolVersion string `json:"protocolVersion"`
	Send            struct {
		ID     string `json:"id"`
		State  int    `json:"state"`
		Output string `json:"output"`
	} `json:"send"`
	Get struct {
		ID      string `json:"id"`
		State   int    `json:"state"`
		Output  string `json:"output"`
		History string `json:"history"`
	} `json:"get"`
	Stream  []jsEvent `json:"stream"`
	Cancel  []jsEvent `json:"cancel"`
	Unknown struct {
		Chain   []string `json:"chain"`
		Message string   `json:"message"`
	} `json:"unknown"`
}

type jsEvent struct {
	Kind  string `json:"kind"`
	State int    `json:"state"`
	Text  string `json:"text"`
}

// @a2a-js/sdk 1.3.0 against the handler: in its default mode (A2A 1.0,
// which refused our 0.3-only card with "No compatible transport found"),
// preferring HTTP+JSON, in legacyCompat mode, and in legacyCompat mode on
// the card's 0.3 members alone (its 0.3 wire). Each resolves the card from
// the base URL, sends (the agent's answer), gets the task, streams,
// cancels a running task, and gets its typed error for an unknown task.
func TestA2AJSClient(t *testing.T) {
	modules := testutil.NodeModules(t, a2aJSPackage)
	f := newFixture(t, a2a.Config{})
	for _, tc := range []struct {
		mode, version, notFound string
	}{
		{"default", "1.0", "JsonRpcTaskNotFoundError"},
		{"rest", "1.0", "RestTaskNotFoundError"},
		{"legacy", "1.0", "JsonRpcTaskNotFoundError"},
		{"legacy03", "0.3", "TaskNotFoundError"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			raw := testutil.RunNode(t, modules, "testdata/a2ajs_client.mjs", 2*time.Minute, f.srv.URL, tc.mode)
			var r jsReport
			if err := json.Unmarshal([]byte(strings.TrimSpace(raw)), &r); err != nil {
				t.Fatalf("node output is not the report: %v\n%s", err, raw)
			}
			if r.ProtocolVersion != tc.version {
				t.Errorf("client speaks %q, want %q", r.ProtocolVersion, tc.version)
			}
			if r.Send.ID == "" || r.Send.State != jsCompleted || r.Send.Output != "upper: hello js" {
				t.Errorf("sendMessage: %+v", r.Send)
			}
			if r.Get.ID != r.Send.ID || r.Get.State != jsCompleted || r.Get.Output != "upper: hello js" || r.Get.History != "hello js" {
				t.Errorf("getTask: %+v", r.Get)
			}
			want := []jsEvent{{"task", jsSubmitted, ""}, {"statusUpdate", jsWorking, ""}, {"artifactUpdate", 0, "streamed js"}, {"statusUpdate", jsCompleted, ""}}
			if !slices.Equal(joinArtifacts(r.Stream), want) {
				t.Errorf("stream: %+v, want %+v", r.Stream, want)
			}
			if len(r.Cancel) < 2 || r.Cancel[0] != (jsEvent{Kind: "cancelTask", State: jsCanceled}) ||
				r.Cancel[len(r.Cancel)-1] != (jsEvent{Kind: "statusUpdate", State: jsCanceled}) {
				t.Errorf("cancel: %+v", r.Cancel)
			}
			// Over 1.0 the message names the task; the 0.3 wire keeps the
			// standard message and puts the detail in error.data, which the
			// JS client's 0.3 path drops.
			if !slices.Contains(r.Unknown.Chain, tc.notFound) || (tc.version == "1.0" && !strings.Contains(r.Unknown.Message, "no-such-task")) {
				t.Errorf("unknown task error: %+v, want a %s naming the task", r.Unknown, tc.notFound)
			}
		})
	}
}

// joinArtifacts merges consecutive artifact updates into one with their
// text joined: the echo's words go out as they come, in one update or
// several, and the stream closes with lastChunk (an empty chunk when the
// text went out already).
func joinArtifacts(evs []jsEvent) []jsEvent {
	var out []jsEvent
	for _, ev := range evs {
		if n := len(out); n > 0 && ev.Kind == "artifactUpdate" && out[n-1].Kind == "artifactUpdate" {
			out[n-1].Text += ev.Text
			continue
		}
		out = append(out, ev)
	}
	return out
}

type jsStreamReport struct {
	ProtocolVersion string  `json:"protocolVersion"`
	FinishedAtFirst int64   `json:"finishedAtFirst"`
	FirstAfterMs    float64 `json:"firstAfterMs"`
	// Usage is the usage in the metadata of the final status.
	Usage  map[string]any `json:"usage"`
	Events []struct {
		Kind      string `json:"kind"`
		State     int    `json:"state"`
		Text      string `json:"text"`
		Append    bool   `json:"append"`
		LastChunk bool   `json:"lastChunk"`
	} `json:"events"`
}

// @a2a-js/sdk 1.3.0 streams a send to a streaming model (the openai and
// the anthropic provider on testutil.StreamingChat's two wires, 200 deltas
// 5 ms apart) over A2A 1.0 JSON-RPC, HTTP+JSON, and the 0.3 wire: its
// first artifact update comes before the model finished its answer, the
// updates append to one artifact, only the last is marked lastChunk, in
// the order of A2A 1.0 §3.5.2, the assembled text is the model's, and the
// final status carries the model's usage.
func TestA2AJSClientStreams(t *testing.T) {
	modules := testutil.NodeModules(t, a2aJSPackage)
	for _, tc := range []struct{ mode, version string }{{"default", "1.0"}, {"rest", "1.0"}, {"legacy03", "0.3"}} {
		t.Run(tc.mode, func(t *testing.T) {
			testutil.EachWire(t, func(t *testing.T, wire string) {
				chat := testutil.NewStreamingChatOn(t, wire, 200, 5*time.Millisecond)
				f := streamingFixture(t, chat)
				probe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					fmt.Fprint(w, chat.Finished())
				}))
				t.Cleanup(probe.Close)
				raw := testutil.RunNode(t, modules, "testdata/a2ajs_stream.mjs", 2*time.Minute, f.srv.URL, tc.mode, probe.URL)
				var r jsStreamReport
				if err := json.Unmarshal([]byte(strings.TrimSpace(raw)), &r); err != nil {
					t.Fatalf("node output is not the report: %v\n%s", err, raw)
				}
				if r.ProtocolVersion != tc.version {
					t.Errorf("client speaks %q, want %q", r.ProtocolVersion, tc.version)
				}
				if r.FinishedAtFirst != 0 {
					t.Errorf("the first artifact update reached the client after the model had finished (%d answers finished)", r.FinishedAtFirst)
				}
				n := len(r.Events)
				if n < 5 || r.Events[0].Kind != "task" || r.Events[0].State != jsSubmitted ||
					r.Events[1].Kind != "statusUpdate" || r.Events[1].State != jsWorking ||
					r.Events[n-1].Kind != "statusUpdate" || r.Events[n-1].State != jsCompleted {
					t.Fatalf("event order %+v", r.Events)
				}
				var text strings.Builder
				updates := r.Events[2 : n-1]
				for i, ev := range updates {
					if ev.Kind != "artifactUpdate" || ev.Append != (i > 0) || ev.LastChunk != (i == len(updates)-1) {
						t.Fatalf("event %d is %+v, want an artifact update (append %v, lastChunk %v)", i+2, ev, i > 0, i == len(updates)-1)
					}
					text.WriteString(ev.Text)
				}
				if text.String() != chat.Text() {
					t.Fatalf("assembled %d bytes, the model wrote %d", text.Len(), len(chat.Text()))
				}
				if len(updates) < 3 {
					t.Fatalf("%d artifact updates: the answer came whole", len(updates))
				}
				wantUsage(t, map[string]any{"usage": r.Usage}, chat)
				t.Logf("%s wire, %d deltas %s apart: first artifact update after %.1f ms, %d updates", wire, chat.Deltas, chat.Gap, r.FirstAfterMs, len(updates))
			})
		})
	}
}
