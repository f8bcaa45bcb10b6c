package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// Streams that open while Close runs (a 2026-07-28 client's
// subscriptions/listen arriving at shutdown) end with it: none is left
// open for the HTTP server's grace period. Many listens race one Close;
// after Close every one has ended (or was refused) within a second.
func TestCloseEndsStreamsOpenedMeanwhile(t *testing.T) {
	for round := range 20 {
		f := newFixture(t, mcpserver.Config{})
		ts := serveHTTP(t, f)
		const n = 30
		var wg sync.WaitGroup
		ended := make(chan time.Time, n)
		for i := range n {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 200 * time.Microsecond)
				req, _ := http.NewRequestWithContext(ctxT(t), "POST", ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":`+metaFrame+`}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", mcpserver.ProtocolVersion2026)
				req.Header.Set("Mcp-Method", "subscriptions/listen")
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				ended <- time.Now()
			})
		}
		time.Sleep(time.Duration(round%10) * 600 * time.Microsecond)
		if err := f.srv.Close(); err != nil {
			t.Fatal(err)
		}
		closed := time.Now()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatalf("round %d: a listen stream is still open 3 s after Close", round)
		}
		close(ended)
		for at := range ended {
			if d := at.Sub(closed); d > time.Second {
				t.Errorf("round %d: a listen ended %s after Close", round, d)
			}
		}
	}
}
