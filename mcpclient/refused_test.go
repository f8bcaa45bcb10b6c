package mcpclient

import (
	"context"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// heapNow reads the heap's live objects (after a GC) and the bytes
// allocated so far, which unlike a sampled peak do not depend on when the
// GC runs on a loaded machine.
func heapNow() (live, allocated uint64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// listingCost starts the module with servers and waits for Ready, whose
// error it returns with the bytes allocated meanwhile and the live heap
// left after it.
type listingCost struct {
	engine *axocoatl.Engine
	err    error
	spent  uint64
	kept   int64
}

func costOfListing(t *testing.T, servers ...ServerConfig) listingCost {
	t.Helper()
	live0, alloc0 := heapNow()
	e, m := startModule(t, Config{Servers: servers, MinBackoff: time.Hour}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	err := m.Ready(ctx)
	live, alloc := heapNow()
	c := listingCost{engine: e, err: err, spent: alloc - alloc0, kept: int64(live) - int64(live0)}
	t.Logf("allocated %.1f MiB, kept %.1f MiB after the refusal; %v", float64(c.spent)/(1<<20), float64(c.kept)/(1<<20), err)
	return c
}

// within fails t when the refused listing allocated more than spent or left
// more than 4 MiB behind.
func (c listingCost) within(t *testing.T, spent uint64) {
	t.Helper()
	if c.spent > spent {
		t.Errorf("the refused listing allocated %.1f MiB", float64(c.spent)/(1<<20))
	}
	if c.kept > 4<<20 {
		t.Errorf("the refused listing still holds %.1f MiB", float64(c.kept)/(1<<20))
	}
}

// Guards max_tools against a stdio server that lists 100,000 tools in one
// page (11 MB, under the 16 MiB message bound): the page is refused from
// its bytes, before the SDK decodes it into tool objects (which cost
// 3.3 GiB of allocations, and a heap peak of 320 MiB, before the count was
// checked), and nothing of it stays once it is refused.
//
// decoy: the same page behind a first "tools" member of one tool. The
// decoder reads the last, so the count must too; counting the first let
// the page through to be decoded and refused only after (3,354 MiB
// allocated, 120 MiB now: go test -run TestRefusedListingIsFreed/decoy -v
// ./mcpclient/).
func TestRefusedListingIsFreed(t *testing.T) {
	for _, mode := range []struct{ name, helper string }{{"onepage", "one-page"}, {"decoy", "decoy-page"}} {
		t.Run(mode.name, func(t *testing.T) {
			hostile := helperServer(mode.name, mode.helper)
			hostile.Timeout = 60 * time.Second
			c := costOfListing(t, hostile)
			if c.err == nil || !strings.Contains(c.err.Error(), "100000 tools by page 1, over max_tools (1000)") {
				t.Fatalf("Ready: %v", c.err)
			}
			// 160 MiB: the page's bytes in the reader, the JSON-RPC
			// decoding and the count (a few copies of 11 MB).
			c.within(t, 160<<20)
		})
	}
}

// Guards max_list_bytes: a listing of 20 tools whose definitions add up to
// 20 KB, under a bound of 8 KiB, is refused with an error naming the bound
// and the count, and none of its tools is registered.
func TestListBytesBound(t *testing.T) {
	wide := helperServer("wide", "wide-tools")
	wide.Timeout = 60 * time.Second
	wide.MaxListBytes = 8 << 10
	e, m := startModule(t, Config{Servers: []ServerConfig{wide}, MinBackoff: time.Hour}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := m.Ready(ctx)
	if err == nil || !strings.Contains(err.Error(), "9171 bytes of tool definitions by tool 9, over max_list_bytes (8192)") {
		t.Fatalf("Ready: %v", err)
	}
	if tools := e.Tools(); len(tools) != 0 {
		t.Errorf("%d tools of the refused listing registered, first %s", len(tools), tools[0].Name)
	}
}
