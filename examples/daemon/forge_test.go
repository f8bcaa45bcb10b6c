package main

import (
	"testing"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// TestRuntimeEventsCannotBeForged: POST /api/events refuses every event
// type the runtime publishes, those of modules the default daemon does not
// start (the MCP client, remote A2A agents) included: on a shared lattice
// another daemon does start them, and an ApprovalVerdict or
// A2AAgentConnected from a client would reach its gate and dashboard.
func TestRuntimeEventsCannotBeForged(t *testing.T) {
	td := startDaemon(t, "", nil)
	types := []string{axocoatl.EventAgentActivated, axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed,
		axocoatl.EventToolCalled, axocoatl.EventToolResult, axocoatl.EventModelResult}
	for _, m := range []axocoatl.EventDeclarer{new(approval.Module), new(mcpclient.Module), new(a2aremote.Module)} {
		for typ := range m.Events() {
			types = append(types, typ)
		}
	}
	for _, typ := range types {
		r := td.do(t, "POST", "/api/events", `{"type":"`+typ+`","payload":{}}`)
		if r.status != 400 {
			t.Errorf("POST /api/events of %s: %d %s, want 400", typ, r.status, r.body)
		}
	}
	if r := td.do(t, "POST", "/api/events", `{"type":"Deployed","payload":{}}`); r.status/100 != 2 {
		t.Fatalf("a custom event: %d %s", r.status, r.body)
	}
}
