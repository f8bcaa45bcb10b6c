package mcpserver_test

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// A subscriptions/listen's stream lasts as long as its client wants, and
// what the go-sdk keeps of its body (the body, its copy, the decoded
// message: some three times its bytes) with it. So a listen holds its
// share of max_bytes_in_flight until its stream ends: of 6 listens of
// 3 MiB with 8 MiB in flight, 2 are open and the rest wait for room,
// then get 503. The live heap after a GC, every stream still open, stays
// within 4 times max_bytes_in_flight (a count of bytes, not a timing).
// When a listen gave its room back once read, all 6 were open and held
// 51 MiB (16 of them 142 MiB).
//
// Guards: bound mcp_server.max_bytes_in_flight (docs/bounds.md).
func TestHTTPListenBodiesWithinBytesInFlight(t *testing.T) {
	const listens, pad = 6, 3 << 20
	const inFlight = 8 << 20
	f := newFixture(t, mcpserver.Config{MaxMessageBytes: 4 << 20, MaxBytesInFlight: inFlight}, axocoatl.HTTPOptions{BodyTimeout: 3 * time.Second})
	ts := serveHTTP(t, f)
	host := strings.TrimPrefix(ts.URL, "http://")
	header := map[string]string{"Mcp-Protocol-Version": mcpserver.ProtocolVersion2026, "Mcp-Method": "subscriptions/listen"}
	filler := strings.Repeat("x", pad)
	runtime.GC()
	before := liveHeap()
	var open int
	for i := range listens {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		meta := strings.TrimSuffix(metaFrame, "}") + `,"pad":"` + filler + `"}`
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":%s}}`, i, meta)
		if err := rawPost(c, host, header, body); err != nil {
			t.Fatal(err)
		}
		status, err := readStatus(c)
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusOK {
			open++
		}
	}
	filler = ""
	runtime.GC()
	held := int64(liveHeap()) - int64(before)
	t.Logf("%d listens of %d MiB open: %.1f MiB of heap in use over the baseline", open, pad>>20, float64(held)/(1<<20))
	if want := inFlight / (pad + 1024); open != want {
		t.Errorf("%d listens of %d MiB open with %d MiB in flight, want %d", open, pad>>20, inFlight>>20, want)
	}
	if held > 4*inFlight {
		t.Errorf("%d open listens hold %.1f MiB of heap, over 4 × max_bytes_in_flight (%d MiB)", open, float64(held)/(1<<20), inFlight>>20)
	}
}

// liveHeap is the bytes of live heap objects after the last GC.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
