package a2awire

import (
	"encoding/json"
	"reflect"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
)

// A 1.0 message read in 0.3 and back is the message it was: data that is
// no JSON object (0.3 data parts are objects) goes wrapped and comes back
// unwrapped, files keep their name, type and bytes, and a nil part is
// dropped instead of crashing the reader.
func TestMessageRoundTrip(t *testing.T) {
	in := &a2a1.Message{
		ID: "m", ContextID: "c", TaskID: "t", Role: a2a1.MessageRoleAgent, ReferenceTasks: []a2a1.TaskID{"r"},
		Parts: a2a1.ContentParts{
			a2a1.NewTextPart("hi"),
			{Content: a2a1.Data{Value: []any{1.0, "two"}}},
			{Content: a2a1.Data{Value: map[string]any{"k": "v"}}, Metadata: map[string]any{"m": true}},
			{Content: a2a1.Raw([]byte{1, 2}), Filename: "f.bin", MediaType: "application/octet-stream"},
			{Content: a2a1.URL("https://h/f"), Filename: "f", MediaType: "text/plain"},
			nil,
		},
	}
	mid := Message03(in)
	if len(mid.Parts) != 5 || mid.Role != a2a03.MessageRoleAgent {
		t.Fatalf("0.3 message %+v", mid)
	}
	if d, ok := mid.Parts[1].(a2a03.DataPart); !ok || !reflect.DeepEqual(d.Data, map[string]any{"value": []any{1.0, "two"}}) {
		t.Fatalf("non-object data in 0.3: %+v", mid.Parts[1])
	}
	back := Message1(mid)
	want := *in
	want.Parts = in.Parts[:5]
	// JSON: the unwrapped part's metadata is empty where it was nil.
	if got, exp := mustJSON(t, back), mustJSON(t, &want); got != exp {
		t.Fatalf("round trip\n got %s\nwant %s", got, exp)
	}
	for _, s := range taskStates {
		if State03(State1(s.v03)) != s.v03 || State1(State03(s.v1)) != s.v1 {
			t.Errorf("state %s/%s does not map back", s.v03, s.v1)
		}
	}
	if State1("bogus") != a2a1.TaskStateUnspecified || State03("bogus") != a2a03.TaskStateUnspecified {
		t.Error("an unknown state maps to a state")
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
