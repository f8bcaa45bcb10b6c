package cluster

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

// A task and its answers read back as written, whatever their text.
func TestWireRoundTrip(t *testing.T) {
	for _, tk := range []task{
		{taskID: "t1", from: "node-b", source: "api", input: "hello"},
		{taskID: "t-ünï", from: "b", source: "", timeoutMS: 1500, input: ""},
		{taskID: "x", from: "y", source: "mcp", timeoutMS: math.MaxInt64, input: "\x00\xff\n binary"},
		{taskID: "t2", from: "b", source: "a2a", input: "turn two", conversationID: "01J-ctx"},
		{taskID: "t3", from: "b", source: "api", timeoutMS: 9, input: "", conversationID: "client-chosen", create: true},
		{taskID: "t4", from: "b", source: "library", input: "x", conversationID: "new"},
	} {
		got, ok := decodeTask(tk.encode())
		if !ok || got != tk {
			t.Errorf("task %+v read back as %+v, %v", tk, got, ok)
		}
	}
	for _, r := range []execReply{
		{Accepted: "node-a"},
		{Done: true, Output: "the answer", DurationMS: 12},
		{Done: true, Output: ""},
		{Done: true, Kind: kindBusy, Error: "daemon a is running its limit", DurationMS: 0},
		{Done: true, Kind: kindCanceled, Error: "canceled", DurationMS: int64(maxTimeout / time.Millisecond)},
		{Done: true, Output: "turn answer", DurationMS: 7, ConversationID: "01J-new"},
		{Done: true, Kind: kindConvBusy, Error: "conversation busy", ConversationID: "c1"},
	} {
		got, ok := decodeReply(r.encode())
		if !ok || got != r {
			t.Errorf("answer %+v read back as %+v, %v", r, got, ok)
		}
	}
	// A duration beyond what a Duration holds (a peer's invention) is capped.
	if got, _ := decodeReply(execReply{Done: true, DurationMS: math.MaxInt64}.encode()); got.DurationMS != int64(maxTimeout/time.Millisecond) {
		t.Errorf("duration_ms MaxInt64 read back as %d", got.DurationMS)
	}
	// A task without a conversation keeps the first frame, which daemons
	// before conversations read; a turn is a frame they refuse.
	if b := (task{taskID: "t", from: "f", input: "x"}).encode(); b[0] != taskV1 {
		t.Errorf("a one-shot task's frame starts with %#x, want %#x", b[0], taskV1)
	}
	if b := (task{taskID: "t", from: "f", input: "x", conversationID: "c"}).encode(); b[0] != taskConversation {
		t.Errorf("a turn's frame starts with %#x, want %#x", b[0], taskConversation)
	}
	// Flags this version does not know are refused, not dropped.
	b := task{taskID: "t", from: "f", conversationID: "c", input: "in"}.encode()
	b[len(b)-len("in")-1] = 0x80
	if tk, ok := decodeTask(b); ok {
		t.Errorf("a turn with unknown flags read as %+v", tk)
	}
	// An error without a kind is a failure, not a success.
	if got, _ := decodeReply(execReply{Done: true, Error: "boom"}.encode()); got.Kind != kindFailed || got.Error != "boom" {
		t.Errorf("kindless error read back as %+v", got)
	}
}

// Whatever a peer sends, reading it neither panics nor reads past it, and
// what reads as a task or an answer writes back to the same.
func FuzzWire(f *testing.F) {
	f.Add(task{taskID: "t", from: "f", source: "api", timeoutMS: 5, input: "in"}.encode())
	f.Add(execReply{Done: true, Kind: kindFailed, Error: "e", DurationMS: 3}.encode())
	f.Add(execReply{Accepted: "n"}.encode())
	f.Add(task{taskID: "t", from: "f", source: "a2a", conversationID: "ctx-1", create: true, input: "in"}.encode())
	f.Add(execReply{Done: true, Output: "o", ConversationID: "ctx-1"}.encode())
	f.Add([]byte{0x02, 0x01, 't', 0x01, 'f', 0x00, 0x00, 0x05, 'c'})
	f.Add([]byte{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		if tk, ok := decodeTask(b); ok {
			if again, ok := decodeTask(tk.encode()); !ok || again != tk {
				t.Fatalf("task %+v does not read back (%+v)", tk, again)
			}
		}
		if r, ok := decodeReply(b); ok {
			if again, ok := decodeReply(r.encode()); !ok || again != r {
				t.Fatalf("answer %+v does not read back (%+v)", r, again)
			}
		}
	})
}

// uvarint reads what binary.Uvarint reads, the same way.
func FuzzUvarint(f *testing.F) {
	for _, v := range []uint64{0, 1, 127, 128, 1 << 35, math.MaxUint64} {
		f.Add(binary.AppendUvarint(nil, v))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		wantV, wantN := binary.Uvarint(b)
		gotV, gotN := uvarint(string(b))
		if gotV != wantV || gotN != wantN {
			t.Fatalf("%x: uvarint %d, %d; binary.Uvarint %d, %d", b, gotV, gotN, wantV, wantN)
		}
	})
}
