package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// Two daemons on one nats-server (JetStream on disk) with a webhook each,
// events posted to both; NATS is stopped for 5 s and started again on the
// same port and store. Neither daemon exits and both keep answering; a
// publish that cannot be buffered answers 503 with the reason; the
// webhooks' durable deliveries resume; every event is delivered or counted
// as missed by the daemon that published it ("missed" of /api/webhooks);
// and b's WebSocket stream gets "lagged" frames that, with the events it
// received, account for every event posted to either daemon.
func TestNATSOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops NATS for 5s")
	}
	addr, store := testutil.FreeAddr(t), t.TempDir()
	ns := testutil.NATSServer(t, addr, store)

	var mu sync.Mutex
	delivered := map[string]map[string]bool{} // daemon → event n
	var bad []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ProducedBy string `json:"produced_by"`
			Payload    struct {
				N json.Number `json:"n"`
			} `json:"payload"`
		}
		err := egress.Verify("outage", r.Header, body, 0)
		if err == nil {
			err = json.Unmarshal(body, &msg)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			bad = append(bad, err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if delivered[msg.ProducedBy] == nil {
			delivered[msg.ProducedBy] = map[string]bool{}
		}
		delivered[msg.ProducedBy][msg.Payload.N.String()] = true
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	daemon := func(node string) *testDaemon {
		return startDaemon(t, fmt.Sprintf(`server:
  data_dir: %s
agents:
  - id: assistant
webhooks:
  - name: w
    url: %s
    secret: outage
    events: [Tick]
    backoff_base: 20ms
    backoff_max: 300ms
    max_attempts: 1000
lattice:
  backend: nats
  nats_url: nats://%s
  node: %s
  reconnect_buffer_bytes: 16KiB
  jetstream:
    ack_wait: 2s
`, t.TempDir(), hook.URL, addr, node), nil)
	}
	a, b := daemon("a"), daemon("b")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, b.url, nil, "")
	var ticks, lagged uint64
	var streamErr error
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				streamErr = err
				return
			}
			var f frame
			_ = json.Unmarshal(data, &f)
			mu.Lock()
			switch {
			case f.Kind == "lagged":
				lagged += f.Missed
			case f.Kind == "event" && f.Event.Type == "Tick":
				ticks++
			}
			mu.Unlock()
		}
	}()

	// Traffic until stopped: a Tick to each daemon every few ms.
	var posted [2]int
	var refused [2]int
	var reason string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for i, td := range []*testDaemon{a, b} {
		node := []string{"a", "b"}[i]
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(3 * time.Millisecond):
				}
				body := fmt.Sprintf(`{"type":"Tick","produced_by":%q,"payload":{"n":%d}}`, node, n)
				resp, err := client.Post(td.url+"/api/events", "application/json", strings.NewReader(body))
				if err != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("daemon %s did not answer: %v", node, err))
					mu.Unlock()
					return
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				posted[i]++
				switch resp.StatusCode {
				case http.StatusAccepted:
				case http.StatusServiceUnavailable:
					refused[i]++
					reason = string(msg)
				default:
					bad = append(bad, fmt.Sprintf("POST /api/events: %d %s", resp.StatusCode, msg))
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second)
	ns.Shutdown()
	ns.WaitForShutdown()
	time.Sleep(5 * time.Second)
	if r := a.do(t, "GET", "/api/webhooks/w/deliveries", ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("deliveries while NATS is away: %d %s, want 503", r.status, r.body)
	}
	testutil.NATSServer(t, addr, store)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	mu.Lock()
	t.Logf("posted %v, refused (503) %v: %s", posted, refused, reason)
	if refused[0] == 0 || !strings.Contains(reason, "cannot take the event") {
		t.Errorf("no publish refused during a 5s outage with a 16 KiB buffer (reason %q)", reason)
	}
	for _, e := range bad {
		t.Error(e)
	}
	mu.Unlock()
	// Each daemon: delivered + missed = posted.
	for i, td := range []*testDaemon{a, b} {
		node := []string{"a", "b"}[i]
		deadline := time.Now().Add(30 * time.Second)
		for {
			var list struct{ Missed int }
			if r := td.do(t, "GET", "/api/webhooks", ""); r.status == 200 {
				_ = json.Unmarshal(r.body, &list)
			}
			mu.Lock()
			got := len(delivered[node])
			mu.Unlock()
			if got+list.Missed == posted[i] {
				t.Logf("%s: %d delivered, %d missed", node, got, list.Missed)
				mu.Lock()
				last := delivered[node][fmt.Sprint(posted[i]-1)]
				mu.Unlock()
				if !last {
					t.Fatalf("%s: the last event, posted after NATS came back, was not delivered", node)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d delivered + %d missed, want %d posted", node, got, list.Missed, posted[i])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// b's stream: every event received or reported lagged. A lagged count
	// is of events of any type (a gap in a node's numbering does not say
	// what was lost): beside the Ticks, a daemon that reconnects publishes
	// one ApprovalSync (the cluster has its approval gate, through
	// Engine.Resync, ask every gate to resend what they hold), which b
	// misses if a's comes back first. Hence up to one
	// more per daemon.
	total := uint64(posted[0] + posted[1])
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got, lost := ticks, lagged
		mu.Unlock()
		if got+lost >= total && got+lost <= total+2 && lost > 0 {
			t.Logf("stream on b: %d events, %d lagged", got, lost)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream on b: %d events + %d lagged, want %d (+2 at most) (stream error %v)", got, lost, total, streamErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, td := range []*testDaemon{a, b} {
		if r := td.do(t, "POST", "/api/agents/assistant/execute", `{"input":"after"}`); r.status != 200 {
			t.Fatalf("execute after the outage: %d %s", r.status, r.body)
		}
	}
	conn.Close(websocket.StatusNormalClosure, "")
	<-streamDone
}
