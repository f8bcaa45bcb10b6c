package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// NATS down at start is a clear error: the file, the line and key, the
// URL without its password, and no daemon half-built.
func TestNATSUnavailableAtStartNamesTheURL(t *testing.T) {
	addr := testutil.FreeAddr(t) // nothing listens there
	src := fmt.Sprintf("agents:\n  - id: x\nlattice:\n  backend: nats\n  nats_url: nats://ops:hunter2secret@%s\n", addr)
	cfg, err := config.ParseWith(context.Background(), "d.yaml", []byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Build(context.Background(), config.BuildOptions{})
	if err == nil {
		t.Fatal("Build succeeded without NATS")
	}
	msg := err.Error()
	if !strings.Contains(msg, "d.yaml:5") || !strings.Contains(msg, "lattice.nats_url") || !strings.Contains(msg, addr) ||
		strings.Contains(msg, "hunter2secret") {
		t.Fatalf("error %q: want file:line, key and host, never the password", msg)
	}
}

func TestJetStreamKeysAreChecked(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"lattice:\n  jetstream:\n    stream: a.b\n", "d.yaml:3: lattice.jetstream.stream"},
		{"lattice:\n  jetstream:\n    consumer: \"x y\"\n", "d.yaml:3: lattice.jetstream.consumer"},
		{"lattice:\n  jetstream:\n    ack_wait: 10ms\n", "d.yaml:3: lattice.jetstream.ack_wait"},
		{"lattice:\n  jetstream:\n    strem: X\n", "d.yaml:3: lattice.jetstream.strem: unknown key"},
		{"lattice:\n  reconnect_buffer_bytes: -5\n", "d.yaml:2: lattice.reconnect_buffer_bytes"},
	} {
		_, err := config.ParseWith(context.Background(), "d.yaml", []byte(tc.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// hookReceiver accepts every request that Verify passes and records the
// event number, the delivery_id and the daemon (X-Test-Node).
type hookReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]map[int]string // node → event n → delivery_id
	bad []string
	n   atomic.Int64
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	hr := &hookReceiver{got: map[string]map[int]string{}}
	hr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := egress.Verify(secret, r.Header, body, 0); err != nil {
			hr.mu.Lock()
			hr.bad = append(hr.bad, err.Error())
			hr.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var msg struct {
			DeliveryID string `json:"delivery_id"`
			ProducedBy string `json:"produced_by"`
			Payload    struct{ N int }
		}
		_ = json.Unmarshal(body, &msg)
		hr.mu.Lock()
		if hr.got[msg.ProducedBy] == nil {
			hr.got[msg.ProducedBy] = map[int]string{}
		}
		if id, ok := hr.got[msg.ProducedBy][msg.Payload.N]; ok && id != msg.DeliveryID {
			hr.bad = append(hr.bad, fmt.Sprintf("event %s/%d under delivery ids %s and %s", msg.ProducedBy, msg.Payload.N, id, msg.DeliveryID))
		}
		hr.got[msg.ProducedBy][msg.Payload.N] = msg.DeliveryID
		hr.mu.Unlock()
		hr.n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		hr.srv.Close()
		hr.mu.Lock()
		defer hr.mu.Unlock()
		for _, b := range hr.bad {
			t.Error(b)
		}
	})
	return hr
}

func (hr *hookReceiver) events(node string) int {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	return len(hr.got[node])
}

// NATS stopped for 5 s while two daemons publish, then started again on the
// same port and store: neither daemon stops, both reconnect on their own,
// the webhooks' durable deliveries resume, and every event is accounted
// for: delivered, or counted as missed (the small reconnect buffer makes
// publishes fail during the outage). A whole-lattice subscriber (what the
// daemon's WebSocket stream uses: its "lagged" frame reports Missed) counts
// what it lost.
func TestNATSOutageWebhooksResume(t *testing.T) {
	if testing.Short() {
		t.Skip("stops NATS for 5s")
	}
	ctx := context.Background()
	addr, store := testutil.FreeAddr(t), t.TempDir()
	ns := testutil.NATSServer(t, addr, store)
	hr := newHookReceiver(t, "outage-secret")
	build := func(node string) *config.Runtime {
		src := fmt.Sprintf(`server:
  data_dir: %s
agents:
  - id: assistant
    provider: echo
webhooks:
  - name: w
    url: %s/hook
    secret: outage-secret
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
`, t.TempDir(), hr.srv.URL, addr, node)
		cfg, err := config.ParseWith(ctx, node+".yaml", []byte(src), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := cfg.Build(ctx, config.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := rt.Close(cctx); err != nil {
				t.Error(err)
			}
		})
		return rt
	}
	a, b := build("a"), build("b")
	if s := a.Egress.Status()[0]; s.Store != "jetstream" || s.ClusterError != "" {
		t.Fatalf("webhook status on NATS: %+v", s)
	}
	stream, err := b.Engine.Bus().Subscribe(lattice.Filter{}, 1<<16)
	if err != nil {
		t.Fatal(err)
	}

	// Traffic: both daemons publish a Tick every 2ms until stopped.
	var published [2]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, rt := range []*config.Runtime{a, b} {
		node := []string{"a", "b"}[i]
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				// An error (the buffer full) is counted by the Bus: not fatal.
				_ = rt.Engine.Publish(ctx, "Tick", node, map[string]int{"n": n})
				published[i].Add(1)
			}
		})
	}
	time.Sleep(time.Second)
	ns.Shutdown()
	ns.WaitForShutdown()
	t.Log("NATS stopped")
	outage := time.Now()
	// Routes that need the cluster say so; the list still answers.
	time.Sleep(100 * time.Millisecond)
	if s := a.Egress.Status()[0]; s.ClusterError == "" {
		t.Fatalf("status while NATS is away: %+v", s)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/webhooks/w/deliveries", nil)
	req.Host = "127.0.0.1"
	a.Egress.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cluster_unavailable") {
		t.Fatalf("deliveries while NATS is away: %d %s", rec.Code, rec.Body)
	}
	time.Sleep(5*time.Second - time.Since(outage))
	before := hr.n.Load()
	testutil.NATSServer(t, addr, store)
	t.Logf("NATS started again; published %d %d", published[0].Load(), published[1].Load())
	t0 := time.Now()
	for !a.Egress.Status()[0].Signed || a.Egress.Status()[0].ClusterError != "" {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("a reconnected after %s", time.Since(t0))
	time.Sleep(2 * time.Second)
	t.Logf("stopping; published %d %d, delivered %d", published[0].Load(), published[1].Load(), hr.n.Load())
	close(stop)
	wg.Wait()

	// Every event is delivered or counted as missed by the daemon that
	// published it.
	for i, rt := range []*config.Runtime{a, b} {
		node := []string{"a", "b"}[i]
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, missed := hr.events(node), rt.Egress.Missed()
			if int64(got)+int64(missed) == published[i].Load() {
				t.Logf("%s: %d published, %d delivered, %d missed", node, published[i].Load(), got, missed)
				if missed == 0 {
					t.Fatalf("%s: nothing missed: the 16 KiB reconnect buffer should have overflowed in 5s", node)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d published, %d delivered + %d missed", node, published[i].Load(), got, missed)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if hr.n.Load() <= before {
		t.Fatal("no delivery after NATS came back")
	}
	// The stream's subscriber: what it did not receive it counts.
	total := published[0].Load() + published[1].Load()
	got := 0
	deadline := time.After(10 * time.Second)
	for int64(got)+int64(stream.Missed()) != total {
		select {
		case <-stream.Events():
			got++
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("stream: %d received + %d missed, want %d", got, stream.Missed(), total)
		}
	}
	t.Logf("stream: %d received, %d missed (lagged) of %d", got, stream.Missed(), total)
	// Both daemons still run agents.
	for _, rt := range []*config.Runtime{a, b} {
		res, err := rt.Engine.Execute(ctx, "assistant", "still here")
		if err != nil || res.Output != "still here" {
			t.Fatalf("execute after the outage: %v %+v", err, res)
		}
	}
}
