package anthropic

import (
	"encoding/json"
	"testing"
)

func TestInputSchemaKeepsKeywords(t *testing.T) {
	s, err := inputSchema(json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	var back map[string]any
	json.Unmarshal(b, &back)
	if back["type"] != "object" || back["properties"] == nil || back["additionalProperties"] != false || len(back["required"].([]any)) != 1 {
		t.Fatalf("input_schema on the wire: %s", b)
	}
	if _, err := inputSchema(json.RawMessage(`{"type":"string"}`)); err == nil {
		t.Fatal("a non-object schema was accepted")
	}
}
