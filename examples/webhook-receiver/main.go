// Command webhook-receiver receives axocoatl webhooks: it checks each
// request with egress.Verify over the exact bytes received, drops
// duplicates by delivery_id (delivery is at-least-once), and prints one
// JSON line per event to stdout.
//
//	WEBHOOK_SECRET=… go run ./examples/webhook-receiver -addr 127.0.0.1:9000
//
// and in axocoatl.yaml:
//
//	webhooks:
//	  - name: local
//	    url: http://127.0.0.1:9000/hook
//	    secret: ${WEBHOOK_SECRET}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/egress"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "address to listen on")
	tolerance := flag.Duration("tolerance", egress.DefaultTolerance, "how far webhook-timestamp may be from this clock")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	secret := os.Getenv("WEBHOOK_SECRET")
	if secret == "" {
		log.Error("set WEBHOOK_SECRET to the webhook's secret")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, newReceiver(secret, *tolerance, os.Stdout, log), log); err != nil {
		log.Error("webhook-receiver", "error", err)
		os.Exit(1)
	}
}

// run serves h on addr until ctx ends.
func run(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	log.Info("listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// maxBody bounds one request body; maxSeen bounds the delivery ids
// remembered for deduplication.
const (
	maxBody = 1 << 20
	maxSeen = 100000
)

// receiver is the webhook endpoint.
type receiver struct {
	secret    string
	tolerance time.Duration
	log       *slog.Logger

	mu   sync.Mutex
	out  io.Writer
	seen map[string]bool
	fifo []string // seen ids, oldest first
}

func newReceiver(secret string, tolerance time.Duration, out io.Writer, log *slog.Logger) *receiver {
	return &receiver{secret: secret, tolerance: tolerance, out: out, log: log, seen: map[string]bool{}}
}

// ServeHTTP answers 204 to a verified delivery (also to a duplicate, so
// that the sender stops retrying it), 401 to one that fails Verify, 400 to
// a body that is not the webhook shape.
func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	// Verify the bytes as received, before parsing them.
	if err := egress.Verify(rc.secret, r.Header, body, rc.tolerance); err != nil {
		rc.log.Warn("refused", "remote", r.RemoteAddr, "error", err)
		http.Error(w, "signature check failed", http.StatusUnauthorized)
		return
	}
	var msg struct {
		DeliveryID string          `json:"delivery_id"`
		EventID    string          `json:"event_id"`
		EventType  string          `json:"event_type"`
		ProducedBy string          `json:"produced_by"`
		Timestamp  int64           `json:"timestamp"`
		Payload    json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.DeliveryID == "" {
		http.Error(w, "not a webhook body", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.seen[msg.DeliveryID] {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rc.seen[msg.DeliveryID] = true
	rc.fifo = append(rc.fifo, msg.DeliveryID)
	if len(rc.fifo) > maxSeen {
		delete(rc.seen, rc.fifo[0])
		rc.fifo = rc.fifo[1:]
	}
	line, _ := json.Marshal(msg)
	fmt.Fprintf(rc.out, "%s\n", line)
	w.WriteHeader(http.StatusNoContent)
}
