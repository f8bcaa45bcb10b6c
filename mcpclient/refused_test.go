package mcpclient

import (
	"context"
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

// Guards max_tools against a stdio server that lists 100,000 tools in one
// page (11 MB, under the 16 MiB message bound): the page is refused from
// its bytes, before the SDK decodes it into tool objects (which cost
// 320 MiB of allocations, the listing's whole size many times over, before
// the count was checked), and nothing of it stays once it is refused.
func TestRefusedListingIsFreed(t *testing.T) {
	hostile := helperServer("onepage", "one-page")
	hostile.Timeout = 60 * time.Second
	_, m := startModule(t, Config{Servers: []ServerConfig{hostile}, MinBackoff: time.Hour}, nil)
	live0, alloc0 := heapNow()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := m.Ready(ctx)
	live, alloc := heapNow()
	kept, spent := int64(live)-int64(live0), alloc-alloc0
	t.Logf("allocated %.1f MiB, kept %.1f MiB after the refusal; %v", float64(spent)/(1<<20), float64(kept)/(1<<20), err)
	if err == nil || !strings.Contains(err.Error(), "100000 tools by page 1, over max_tools (1000)") {
		t.Fatalf("Ready: %v", err)
	}
	// 160 MiB: the page's bytes in the reader, the JSON-RPC decoding and
	// the count (a few copies of 11 MB); decoded tools cost 320 MiB.
	if spent > 160<<20 {
		t.Errorf("refusing the listing allocated %.1f MiB", float64(spent)/(1<<20))
	}
	if kept > 4<<20 {
		t.Errorf("the refused listing still holds %.1f MiB", float64(kept)/(1<<20))
	}
}
