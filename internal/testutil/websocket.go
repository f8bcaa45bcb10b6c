package testutil

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/coder/websocket"
)

// ReadFrame reads one frame of an event stream, which must be a JSON text
// frame, into dst.
func ReadFrame(t testing.TB, ctx context.Context, conn *websocket.Conn, dst any) {
	t.Helper()
	typ, data, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("frame type %v, want text", typ)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		t.Fatalf("frame %q: %v", data, err)
	}
}
