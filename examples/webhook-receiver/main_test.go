package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The receiver takes what egress sends: signed events are printed once
// each; a tampered body, a wrong secret and a replayed old request are
// refused.
func TestReceiverWithEgress(t *testing.T) {
	const secret = "receiver-secret"
	var out testutil.SyncBuffer
	rc := newReceiver(secret, 0, &out, slog.New(slog.DiscardHandler))
	var (
		mu       sync.Mutex // deliveries arrive concurrently
		captured []*http.Request
		bodies   [][]byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		captured, bodies = append(captured, r.Clone(context.Background())), append(bodies, b)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		rc.ServeHTTP(w, r)
	}))
	defer srv.Close()

	eng := axocoatl.New(axocoatl.Options{})
	m, err := egress.New(egress.Config{Webhooks: []egress.Webhook{{Name: "local", URL: srv.URL + "/hook", Secret: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"TaskCompleted", "Deployed"} {
		if err := eng.Publish(context.Background(), typ, "test", map[string]string{"k": "v"}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(out.String(), "\n") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("printed: %q", out.String())
		}
	}
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"event_type":"TaskCompleted"`) || !strings.Contains(out.String(), `"payload":{"k":"v"}`) {
		t.Fatalf("printed: %s", out.String())
	}

	// Replays of a captured request.
	send := func(h http.Header, body []byte) int {
		req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
		req.Header = h.Clone()
		rec := httptest.NewRecorder()
		rc.ServeHTTP(rec, req)
		return rec.Code
	}
	mu.Lock()
	h, body := captured[0].Header, bodies[0]
	mu.Unlock()
	if code := send(h, body); code != http.StatusNoContent || strings.Count(out.String(), "\n") != 2 {
		t.Fatalf("duplicate: %d, printed %q", code, out.String())
	}
	tampered := bytes.Replace(body, []byte(`"v"`), []byte(`"w"`), 1)
	if code := send(h, tampered); code != http.StatusUnauthorized {
		t.Fatalf("tampered body: %d", code)
	}
	other := newReceiver("other-secret", 0, io.Discard, slog.New(slog.DiscardHandler))
	req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	req.Header = h.Clone()
	rec := httptest.NewRecorder()
	other.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", rec.Code)
	}
	strict := newReceiver(secret, time.Nanosecond, io.Discard, slog.New(slog.DiscardHandler))
	time.Sleep(1100 * time.Millisecond) // the timestamp has second resolution
	rec = httptest.NewRecorder()
	req = httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	req.Header = h.Clone()
	strict.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("stale timestamp: %d", rec.Code)
	}
}

// run serves until its context ends and then returns cleanly.
func TestRun(t *testing.T) {
	var logs testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, "127.0.0.1:0", newReceiver("s", 0, io.Discard, slog.New(slog.DiscardHandler)), slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "listening"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not listening")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
