package testutil

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/coder/websocket"
)

// Frame is any server frame of the event stream (GET /api/events).
type Frame struct {
	Kind             string            `json:"kind"`
	PendingApprovals []json.RawMessage `json:"pending_approvals"`
	Missed           uint64            `json:"missed"`
	Event            struct {
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		ProducedBy string          `json:"produced_by"`
		Timestamp  int64           `json:"timestamp"`
		Payload    json.RawMessage `json:"payload"`
	} `json:"event"`
	Unverified bool   `json:"unverified"`
	Node       string `json:"node"`
	// History is a ready frame's.
	History []struct {
		Type       string `json:"type"`
		Unverified bool   `json:"unverified"`
		Node       string `json:"node"`
	} `json:"history"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// ReadFrame reads one frame of an event stream, which must be a JSON text
// frame.
func ReadFrame(t testing.TB, ctx context.Context, conn *websocket.Conn) Frame {
	t.Helper()
	var f Frame
	typ, data, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("frame type %v, want text", typ)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("frame %q: %v", data, err)
	}
	return f
}
