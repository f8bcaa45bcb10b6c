package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// benchReceiver answers 204 to every POST after reading the body, and
// signals once want requests have arrived.
type benchReceiver struct {
	srv  *httptest.Server
	n    atomic.Int64
	want atomic.Int64
	done chan struct{}
	once sync.Once
}

func newBenchReceiver(b *testing.B) *benchReceiver {
	r := &benchReceiver{done: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.WriteHeader(http.StatusNoContent)
		if r.n.Add(1) == r.want.Load() {
			r.once.Do(func() { close(r.done) })
		}
	}))
	b.Cleanup(r.srv.Close)
	return r
}

// BenchmarkDeliveries measures signed deliveries per second to a local
// receiver at 32 in flight ("egress-jetstream": on a NATS lattice, through
// JetStream): "egress" publishes b.N events on the lattice
// and waits until the receiver has them all (durable store on, so each
// event is written to bbolt before it is sent and removed after);
// "egress-memory" is the same without a data dir; "nethttp" is a plain
// net/http client loop POSTing a body of the same size with the same
// headers, signed once beforehand, at the same concurrency. Compare them
// within one run (bench/README.md).
func BenchmarkDeliveries(b *testing.B) {
	const concurrency = 32
	body := []byte(`{"delivery_id":"01a2f3c4-0000-7000-8000-000000000000","event_id":"01a2f3c4-0000-7000-8000-000000000001","event_type":"TaskCompleted","produced_by":"bench","timestamp":1764500000,"payload":{"agent_id":"assistant","task_id":"t-1","output":"done","duration_ms":12,"source":"api"}}`)
	// Events arrive with their payload already JSON, as the Engine's own do.
	payload := json.RawMessage(`{"agent_id":"assistant","task_id":"t-1","output":"done","duration_ms":12,"source":"api"}`)

	b.Run("nethttp", func(b *testing.B) {
		rc := newBenchReceiver(b)
		rc.want.Store(int64(b.N))
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = concurrency
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		defer tr.CloseIdleConnections()
		// The same headers egress sends (contract §7), signed once here.
		m, err := New(Config{Webhooks: []Webhook{{Name: "bench", URL: rc.srv.URL, Secret: "bench-secret"}}})
		if err != nil {
			b.Fatal(err)
		}
		hdr := http.Header{}
		m.hooks[0].stamp(hdr, &delivery{id: "01a2f3c4-0000-7000-8000-000000000000", eventType: axocoatl.EventTaskCompleted, body: body}, time.Now())
		var next atomic.Int64
		b.ResetTimer()
		var wg sync.WaitGroup
		for range concurrency {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					req, _ := http.NewRequest(http.MethodPost, rc.srv.URL, bytes.NewReader(body))
					req.Header = hdr.Clone()
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
	})

	for _, durable := range []bool{true, false} {
		name := "egress"
		if !durable {
			name = "egress-memory"
		}
		b.Run(name, func(b *testing.B) {
			rc := newBenchReceiver(b)
			rc.want.Store(int64(b.N))
			cfg := Config{Webhooks: []Webhook{{Name: "bench", URL: rc.srv.URL, Secret: "bench-secret",
				Concurrency: concurrency, QueueSize: max(b.N, 1)}}}
			if durable {
				cfg.DataDir = b.TempDir()
			}
			h := start(b, cfg)
			b.ResetTimer()
			for range b.N {
				if err := h.eng.Publish(context.Background(), axocoatl.EventTaskCompleted, "bench", payload); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-rc.done:
			case <-time.After(5 * time.Minute):
				b.Fatalf("only %d of %d delivered", rc.n.Load(), b.N)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
			if s := h.status(b, "bench"); s.Dropped != 0 || h.mod.Missed() != 0 {
				b.Fatalf("dropped %d, missed %d", s.Dropped, h.mod.Missed())
			}
		})
	}

	// The same on a NATS lattice: each delivery queued in a JetStream work
	// queue (file storage) with an acknowledged publish, pulled from the
	// webhook's durable consumer, sent, and acked.
	b.Run("egress-jetstream", func(b *testing.B) {
		rc := newBenchReceiver(b)
		rc.want.Store(int64(b.N))
		h := jsNode(b, jsServer(b), "bench", Webhook{Name: "bench", URL: rc.srv.URL, Secret: "bench-secret",
			Concurrency: concurrency, QueueSize: max(b.N, 1)})
		b.ResetTimer()
		for range b.N {
			if err := h.eng.Publish(context.Background(), axocoatl.EventTaskCompleted, "bench", payload); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-rc.done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d delivered", rc.n.Load(), b.N)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
		if s := h.status(b, "bench"); s.Dropped != 0 || h.mod.Missed() != 0 {
			b.Fatalf("dropped %d, missed %d", s.Dropped, h.mod.Missed())
		}
	})
}
