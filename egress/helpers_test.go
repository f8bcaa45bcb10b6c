package egress

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	if os.Getenv(jsChildEnv) != "" {
		os.Exit(jsChild())
	}
	goleak.VerifyTestMain(m)
}

// harness is an Engine with the module attached and its logs captured.
type harness struct {
	eng  *axocoatl.Engine
	mod  *Module
	logs *testutil.SyncBuffer
}

func start(t testing.TB, cfg Config) *harness {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	h := startOn(t, axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}), cfg)
	h.logs = logs
	return h
}

// startOn starts the module of cfg on eng, both closed with the test.
func startOn(t testing.TB, eng *axocoatl.Engine, cfg Config) *harness {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h := &harness{eng: eng, mod: m}
	t.Cleanup(func() { h.close(t) })
	return h
}

func (h *harness) close(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.eng.Close(ctx); err != nil {
		t.Error(err)
	}
}

// publish publishes n events of type typ with payload {"n": i}.
func (h *harness) publish(t testing.TB, typ string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := h.eng.Publish(context.Background(), typ, "test", map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
}

func (h *harness) status(t testing.TB, name string) WebhookStatus {
	t.Helper()
	for _, s := range h.mod.Status() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no webhook %q", name)
	return WebhookStatus{}
}

// api calls the module's handler and decodes the JSON answer.
func (h *harness) api(t testing.TB, method, path string, out any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1" // the Engine's guard answers a token-less server only at its own names
	h.mod.ServeHTTP(rec, req)
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, rec.Code, rec.Body, err)
		}
	}
	return rec.Code
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// received is one request as a receiver saw it.
type received struct {
	code   int // the answer: 0 reset, -1 hung
	at     time.Time
	header http.Header
	body   []byte
	msg    wireMsg
}

type wireMsg struct {
	DeliveryID string          `json:"delivery_id"`
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	ProducedBy string          `json:"produced_by"`
	Timestamp  int64           `json:"timestamp"`
	Payload    json.RawMessage `json:"payload"`
}

// receiver is a real HTTP endpoint. Every request is checked on its own:
// the body must be the contract's six members and, with a secret, both
// signatures are recomputed here with crypto/hmac (not with the package's
// code) over the bytes received. answer decides the response; it may
// return 0 to have the request recorded and the connection reset.
type receiver struct {
	t      testing.TB
	secret string
	srv    *httptest.Server
	answer func(r received, n int) int // n: how many times this delivery was seen, from 1

	mu    sync.Mutex
	reqs  []received
	seen  map[string]int
	bad   []string
	hangs chan struct{}
}

func newReceiver(t testing.TB, secret string, answer func(r received, n int) int) *receiver {
	return newReceiverWrapped(t, secret, answer, nil)
}

// newReceiverWrapped is newReceiver with wrap applied to each response
// writer (to add response headers).
func newReceiverWrapped(t testing.TB, secret string, answer func(r received, n int) int, wrap func(http.ResponseWriter) http.ResponseWriter) *receiver {
	rc := &receiver{t: t, secret: secret, answer: answer, seen: map[string]int{}, hangs: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wrap != nil {
			w = wrap(w)
		}
		rc.serve(w, r)
	}))
	t.Cleanup(func() {
		close(rc.hangs)
		rc.srv.CloseClientConnections()
		rc.srv.Close()
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, b := range rc.bad {
			t.Error(b)
		}
	})
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/hook" }

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rec := received{at: time.Now(), header: r.Header.Clone(), body: body}
	problem := rc.check(r, &rec)
	rc.mu.Lock()
	if problem != "" {
		rc.bad = append(rc.bad, problem)
	}
	rc.seen[rec.msg.DeliveryID]++
	n := rc.seen[rec.msg.DeliveryID]
	rc.mu.Unlock()
	code := http.StatusOK
	if rc.answer != nil {
		code = rc.answer(rec, n)
	}
	rec.code = code
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, rec)
	rc.mu.Unlock()
	switch code {
	case 0: // reset the connection
		panic(http.ErrAbortHandler)
	case -1: // hang until the client gives up or the test ends
		select {
		case <-r.Context().Done():
		case <-rc.hangs:
		}
		return
	}
	w.WriteHeader(code)
}

func (rc *receiver) check(r *http.Request, rec *received) string {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(r.Header.Get("User-Agent"), "axocoatl/") {
		return fmt.Sprintf("request %s with Content-Type %q, User-Agent %q", r.Method, r.Header.Get("Content-Type"), r.Header.Get("User-Agent"))
	}
	dec := json.NewDecoder(strings.NewReader(string(rec.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec.msg); err != nil {
		return fmt.Sprintf("body %s: %v", rec.body, err)
	}
	var members map[string]json.RawMessage
	_ = json.Unmarshal(rec.body, &members)
	if len(members) != 6 || rec.msg.DeliveryID == "" || rec.msg.EventID == "" || rec.msg.EventType == "" || rec.msg.Timestamp == 0 {
		return fmt.Sprintf("body lacks a member: %s", rec.body)
	}
	if r.Header.Get(HeaderDelivery) != rec.msg.DeliveryID || r.Header.Get(HeaderEvent) != rec.msg.EventType {
		return fmt.Sprintf("headers %v do not match body %s", r.Header, rec.body)
	}
	ts := r.Header.Get(HeaderTimestamp)
	if ts == "" {
		return "no X-Axocoatl-Timestamp"
	}
	if rc.secret == "" {
		if r.Header.Get(HeaderSignature) != "" || r.Header.Get("webhook-signature") != "" {
			return "unsigned webhook sent a signature"
		}
		return ""
	}
	key := []byte(rc.secret)
	if k, ok := strings.CutPrefix(rc.secret, "whsec_"); ok {
		key, _ = base64.StdEncoding.DecodeString(k)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(rec.body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); !hmac.Equal([]byte(r.Header.Get("X-Axocoatl-Signature")), []byte(want)) {
		return fmt.Sprintf("X-Axocoatl-Signature %q, want %q", r.Header.Get("X-Axocoatl-Signature"), want)
	}
	id, wts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	if id != rec.msg.DeliveryID || wts != ts {
		return fmt.Sprintf("webhook-id %q / webhook-timestamp %q, want %q / %q", id, wts, rec.msg.DeliveryID, ts)
	}
	mac = hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + wts + "."))
	mac.Write(rec.body)
	if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte(want)) {
		return fmt.Sprintf("webhook-signature %q, want %q", r.Header.Get("webhook-signature"), want)
	}
	return ""
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.reqs...)
}

// accepted is the set of events answered 2xx.
func (rc *receiver) accepted() map[string]bool {
	out := map[string]bool{}
	for _, r := range rc.requests() {
		if r.code >= 200 && r.code < 300 {
			out[r.msg.EventID] = true
		}
	}
	return out
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// byDelivery groups the requests by delivery_id, in arrival order.
func (rc *receiver) byDelivery() map[string][]received {
	out := map[string][]received{}
	for _, r := range rc.requests() {
		out[r.msg.DeliveryID] = append(out[r.msg.DeliveryID], r)
	}
	return out
}

// eventsOf maps event_id → the delivery_ids it arrived with.
func eventsOf(reqs []received) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, r := range reqs {
		if out[r.msg.EventID] == nil {
			out[r.msg.EventID] = map[string]bool{}
		}
		out[r.msg.EventID][r.msg.DeliveryID] = true
	}
	return out
}

// fast are the timing knobs of tests: short backoff, short timeout.
func fast(w Webhook) Webhook {
	if w.BackoffBase == 0 {
		w.BackoffBase = 5 * time.Millisecond
	}
	if w.BackoffMax == 0 {
		w.BackoffMax = 50 * time.Millisecond
	}
	if w.Timeout == 0 {
		w.Timeout = 5 * time.Second
	}
	return w
}
