package approval_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// The module declares its events' classes to the Engine: requests and
// resolutions are coordination, the protocol between Engines telemetry, so
// a webhook with no filter (every coordination event) does not get the
// EventSync the gate publishes as it starts. One sender: deliveries arrive
// in the order the events were published, so the marker published after
// the start is the first delivery unless the sync came before it.
func TestDeclaredClassesReachWebhooksAndFilters(t *testing.T) {
	got := make(chan string, 16)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(egress.HeaderEvent)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	hooks, err := egress.New(egress.Config{Webhooks: []egress.Webhook{{Name: "all", URL: receiver.URL, Concurrency: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), hooks); err != nil {
		t.Fatal(err)
	}
	tel, err := e.Bus().Subscribe(lattice.Filter{Class: lattice.ClassTelemetry}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	gate, err := approval.New(approval.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), gate); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-tel.Events():
		if ev.Type != approval.EventSync {
			t.Fatalf("telemetry subscriber got %s first, want %s", ev.Type, approval.EventSync)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no EventSync on a telemetry filter")
	}
	if err := e.Publish(context.Background(), "Marker", "test", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case typ := <-got:
		if typ != "Marker" {
			t.Fatalf("the webhook with no filter got %s first, want Marker", typ)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	for typ, want := range map[string]lattice.Class{
		approval.EventRequested: lattice.ClassCoordination, approval.EventResolved: lattice.ClassCoordination,
		approval.EventVerdict: lattice.ClassTelemetry, approval.EventSync: lattice.ClassTelemetry, approval.EventPending: lattice.ClassTelemetry,
	} {
		if c := e.ClassOf(typ); c != want {
			t.Errorf("ClassOf(%s) = %s, want %s", typ, c, want)
		}
	}
}
