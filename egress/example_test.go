package egress_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/egress"
)

// Send the Engine's coordination events to a webhook, signed. The host
// attaches the module with Engine.Use, mounts it (it serves the webhook API)
// and may register its metrics with Prometheus.
func ExampleNew() {
	got := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := egress.Verify("s3cret", r.Header, body, 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got <- r.Header.Get(egress.HeaderEvent)
	}))
	defer receiver.Close()

	ctx := context.Background()
	engine := axocoatl.New(axocoatl.Options{})
	defer engine.Close(ctx)
	m, err := egress.New(egress.Config{
		// DataDir: "./data", // keep deliveries across restarts and crashes
		Webhooks: []egress.Webhook{{
			Name:   "alerts",
			URL:    receiver.URL + "/hooks/axocoatl",
			Events: []string{axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed},
			Secret: "s3cret",
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := engine.Use(ctx, m); err != nil {
		fmt.Println(err)
		return
	}
	// mux.Handle("/api/webhooks/", m)         // the webhook API
	// prometheus.MustRegister(m.Collector())  // its metrics

	_ = engine.Publish(ctx, axocoatl.EventTaskCompleted, "example", map[string]string{"task_id": "t1"})
	select {
	case ev := <-got:
		fmt.Println("received", ev)
	case <-time.After(10 * time.Second):
		fmt.Println("nothing received")
	}
	fmt.Println(m.Describe()[0].Filter)
	// Output:
	// received TaskCompleted
	// TaskCompleted, AgentFailed
}

// A receiver checks each request over the exact bytes it received, before
// parsing them.
func ExampleVerify() {
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := egress.Verify("whsec_MDEyMzQ1Njc4OWFiY2RlZg==", r.Header, body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// body is an authentic {"delivery_id", "event_id", "event_type", …};
		// deliveries are at-least-once: skip a delivery_id already handled.
		w.WriteHeader(http.StatusNoContent)
	}
	rec := httptest.NewRecorder()
	handler(rec, httptest.NewRequest(http.MethodPost, "/hook", nil)) // unsigned
	fmt.Println(rec.Code)
	// Output: 401
}
