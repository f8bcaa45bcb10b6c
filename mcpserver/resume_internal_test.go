package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The resume buffer holds at most its bound however a client spends it:
// many small streams (a POST each, as a long session makes: each holds its
// empty priming event) or large events. What it drops is reported as
// purged, never replayed in part; what it keeps replays in order. Retained
// heap after 200,000 streams stays within a few times the bound (the
// go-sdk's MemoryEventStore, which counts event bytes only, kept every
// stream of a session until it closed).
//
// Guards: bound mcp_server.resume_buffer_bytes (docs/bounds.md).
func TestResumeStoreBound(t *testing.T) {
	ctx := context.Background()
	const bound = 1 << 20
	before := heapInUse()
	s := newResumeStore(bound)
	for i := range 200_000 {
		sess := fmt.Sprintf("session-%d", i%10)
		stream := fmt.Sprintf("stream-%d", i)
		s.Open(ctx, sess, stream)
		s.Append(ctx, sess, stream, nil)
		s.Append(ctx, sess, stream, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		if n, _ := s.usage(); n > bound {
			t.Fatalf("after %d streams the store counts %d bytes, over its bound %d", i+1, n, bound)
		}
	}
	retained := int64(heapInUse()) - int64(before)
	n, streams := s.usage()
	t.Logf("200,000 streams: %d kept, %d bytes counted, %d bytes of heap retained (bound %d)", streams, n, retained, bound)
	if retained > 4*bound {
		t.Errorf("200,000 streams retain %d bytes of heap, want at most 4× the %d-byte bound", retained, bound)
	}
	for _, err := range s.After(ctx, "session-0", "stream-0", 0) {
		if !errors.Is(err, mcp.ErrEventsPurged) {
			t.Errorf("resuming the first stream: %v, want ErrEventsPurged", err)
		}
	}
	var got []string
	for d, err := range s.After(ctx, "session-9", "stream-199999", -1) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(d))
	}
	if len(got) != 2 || got[0] != "" {
		t.Errorf("the last stream replays %q, want its priming event and answer", got)
	}
	runtime.KeepAlive(s)

	// One stream whose events outgrow the bound keeps its newest ones: an
	// index before them is purged, and the last one replays.
	s = newResumeStore(4 << 10)
	s.Open(ctx, "s", "big")
	for i := range 100 {
		s.Append(ctx, "s", "big", fmt.Appendf(nil, "%0100d", i))
	}
	if n, _ := s.usage(); n > 4<<10 {
		t.Errorf("one growing stream: %d bytes counted, over the bound", n)
	}
	for _, err := range s.After(ctx, "s", "big", 0) {
		if !errors.Is(err, mcp.ErrEventsPurged) {
			t.Errorf("resuming after event 0 of 100 past the bound: %v, want ErrEventsPurged", err)
		}
	}
	for d, err := range s.After(ctx, "s", "big", 98) {
		if err != nil || string(d) != fmt.Sprintf("%0100d", 99) {
			t.Errorf("resuming after event 98: %q, %v, want event 99", d, err)
		}
	}

	// A dropped stream appended to again cannot be resumed at any index
	// (its numbering is lost), and a closed session frees everything.
	s = newResumeStore(1 << 10)
	s.Open(ctx, "a", "old")
	s.Append(ctx, "a", "old", nil)
	for i := range 20 {
		s.Open(ctx, "a", fmt.Sprint(i))
		s.Append(ctx, "a", fmt.Sprint(i), make([]byte, 100))
	}
	s.Append(ctx, "a", "old", []byte("late"))
	// The GET stream (id "") of a session is emptied, not forgotten: a
	// GET without Last-Event-ID (index -1) still finds it, with nothing to
	// replay, and its numbering goes on.
	s.Open(ctx, "b", "")
	s.Append(ctx, "b", "", []byte("list_changed"))
	for i := range 20 {
		s.Open(ctx, "a", fmt.Sprint("x", i))
		s.Append(ctx, "a", fmt.Sprint("x", i), make([]byte, 100))
	}
	for d, err := range s.After(ctx, "b", "", -1) {
		t.Errorf("the emptied GET stream from the start: %q, %v, want nothing", d, err)
	}
	s.Append(ctx, "b", "", []byte("again"))
	for d, err := range s.After(ctx, "b", "", 0) {
		if err != nil || string(d) != "again" {
			t.Errorf("the GET stream after event 0: %q, %v, want event 1", d, err)
		}
	}
	s.SessionClosed(ctx, "b")
	for _, err := range s.After(ctx, "a", "old", 0) {
		if !errors.Is(err, mcp.ErrEventsPurged) {
			t.Errorf("resuming a dropped stream appended to again: %v, want ErrEventsPurged", err)
		}
	}
	s.SessionClosed(ctx, "a")
	if n, streams := s.usage(); n != 0 || streams != 0 {
		t.Errorf("after SessionClosed: %d bytes, %d streams, want none", n, streams)
	}
}
