package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
	"github.com/axocoatl/axocoatl-go/secret"
)

// The cluster test runs each daemon in a child process: this test binary
// again, with these variables set.
const (
	jsChildEnv   = "EGRESS_JS_CHILD" // the node name
	jsNATSEnv    = "EGRESS_JS_NATS"
	jsURLEnv     = "EGRESS_JS_URL"
	jsPublishEnv = "EGRESS_JS_PUBLISH" // "offset,count" of the events to publish
	jsSecret     = "cluster-secret"
	// nodeHeader is a static header each daemon's webhook adds: the
	// receiver tells the daemons apart by it.
	nodeHeader = "X-Test-Node"
	// pidHeader is the daemon's process id: the receiver refuses a killed
	// daemon's requests still in flight when it comes up.
	pidHeader = "X-Test-Pid"
)

// jsChild is one daemon: an Engine on the NATS lattice (with the options
// config.Build uses: reconnect forever, a bounded buffer) and egress on
// JetStream. It publishes its events, prints "published" once egress has
// queued them all in JetStream, and runs until
// killed, printing "stopped" if NATS closes its connection for good.
func jsChild() int {
	node := os.Getenv(jsChildEnv)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bus, err := latticenats.Connect(os.Getenv(jsNATSEnv), latticenats.Options{Node: node},
		natsgo.Name(node), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(200*time.Millisecond))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	eng := axocoatl.New(axocoatl.Options{Bus: bus, Logger: log})
	m, err := New(Config{
		Webhooks: []Webhook{{Name: "w", URL: os.Getenv(jsURLEnv), Secret: jsSecret, Headers: map[string]secret.Secret{nodeHeader: secret.Secret(node), pidHeader: secret.Secret(strconv.Itoa(os.Getpid()))},
			MaxAttempts: 1000, BackoffBase: 20 * time.Millisecond, BackoffMax: 300 * time.Millisecond, Timeout: 5 * time.Second}},
		JetStream: &JetStream{Conn: bus.Conn(), Prefix: bus.Prefix(), AckWait: 2 * time.Second},
	})
	if err == nil {
		err = eng.Use(context.Background(), m)
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var offset, n int
	if _, err := fmt.Sscanf(os.Getenv(jsPublishEnv), "%d,%d", &offset, &n); err != nil {
		fmt.Println("error", err)
		return 1
	}
	for i := range n {
		if err := eng.Publish(context.Background(), "Deployed", node, map[string]int{"n": offset + i}); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	// Durable from here: every delivery is in JetStream.
	for m.Status()[0].Enqueued < uint64(n) {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("published", n)
	closed := make(chan struct{})
	bus.Conn().SetClosedHandler(func(*natsgo.Conn) { close(closed) })
	<-closed
	fmt.Println("stopped: NATS connection closed")
	return 1
}

// consumerState describes the webhook's shared consumer, for a failure.
func consumerState(t *testing.T, url string) string {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return err.Error()
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, "AXOCOATL_EGRESS", "axocoatl_egress_w")
	if err != nil {
		return err.Error()
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("pending %d, ack pending %d, redelivered %d, waiting pulls %d, delivered %+v, ack floor %+v",
		ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Delivered, ci.AckFloor)
}

// daemonProc is a child daemon as the parent sees it.
type daemonProc struct {
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	lines  chan string // stdout after "published"
}

func startDaemon(t *testing.T, node, natsURL, hookURL string, offset, n int) *daemonProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), jsChildEnv+"="+node, jsNATSEnv+"="+natsURL, jsURLEnv+"="+hookURL,
		jsPublishEnv+"="+strconv.Itoa(offset)+","+strconv.Itoa(n))
	p := &daemonProc{cmd: cmd, stderr: &testutil.SyncBuffer{}, lines: make(chan string, 16)}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	select {
	case line := <-p.lines:
		if !strings.HasPrefix(line, "published") {
			t.Fatalf("daemon %s: %q (stderr: %s)", node, line, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon %s did not publish (stderr: %s)", node, p.stderr.String())
	}
	return p
}

// alive fails the test if the daemon exited or said something.
func (p *daemonProc) alive(t *testing.T, node string) {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		t.Fatalf("daemon %s: %q (open %v; stderr: %s)", node, line, ok, p.stderr.String())
	default:
	}
	if p.cmd.ProcessState != nil {
		t.Fatalf("daemon %s exited: %v", node, p.cmd.ProcessState)
	}
}

// clusterReceiver is the webhook endpoint of the cluster tests: it checks
// each request with Verify, and records by event who sent it.
type clusterReceiver struct {
	*receiver
	up atomic.Bool
	// killed is the pid of a daemon killed: a request of its that reaches
	// the handler late (read before the kill, answered after the receiver
	// came up) is refused, as its sender can take no answer any more.
	killed atomic.Int64

	mu        sync.Mutex
	verifyErr []string
}

func newClusterReceiver(t *testing.T) *clusterReceiver {
	cr := &clusterReceiver{}
	cr.receiver = newReceiver(t, jsSecret, func(r received, _ int) int {
		if err := Verify(jsSecret, r.header, r.body, 0); err != nil {
			cr.mu.Lock()
			cr.verifyErr = append(cr.verifyErr, err.Error())
			cr.mu.Unlock()
			return http.StatusBadRequest
		}
		if pid, _ := strconv.ParseInt(r.header.Get(pidHeader), 10, 64); pid != 0 && pid == cr.killed.Load() {
			return http.StatusServiceUnavailable
		}
		if cr.up.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	t.Cleanup(func() {
		cr.mu.Lock()
		defer cr.mu.Unlock()
		if len(cr.verifyErr) > 0 {
			t.Errorf("%d requests failed Verify, first: %s", len(cr.verifyErr), cr.verifyErr[0])
		}
	})
	return cr
}

// check asserts the cluster's promise over everything received: every
// event of 0..n-1 accepted exactly once, by one daemon, and every request
// for an event under one delivery_id. It returns who accepted each event.
func (cr *clusterReceiver) check(t *testing.T, n int) map[int]string {
	t.Helper()
	by := map[int]string{}
	ids := map[int]string{}
	for _, r := range cr.requests() {
		var p struct{ N *int }
		if err := json.Unmarshal(r.msg.Payload, &p); err != nil || p.N == nil {
			t.Fatalf("payload %s", r.msg.Payload)
		}
		k := *p.N
		if id, ok := ids[k]; ok && id != r.msg.DeliveryID {
			t.Fatalf("event %d arrived under two delivery ids %s and %s", k, id, r.msg.DeliveryID)
		}
		ids[k] = r.msg.DeliveryID
		if r.code/100 != 2 {
			continue
		}
		node := r.header.Get(nodeHeader)
		if prev, ok := by[k]; ok {
			var seen []string
			for _, q := range cr.requests() {
				if q.msg.DeliveryID == r.msg.DeliveryID {
					seen = append(seen, fmt.Sprintf("%s %s → %d", q.at.Format("15:04:05.000"), q.header.Get(nodeHeader), q.code))
				}
			}
			t.Fatalf("event %d (delivery %s) accepted twice: by %s and by %s; its requests: %s", k, r.msg.DeliveryID, prev, node, strings.Join(seen, ", "))
		}
		by[k] = node
	}
	for k := range n {
		if _, ok := by[k]; !ok {
			t.Fatalf("event %d never accepted (%d of %d were)", k, len(by), n)
		}
	}
	if len(by) != n {
		t.Fatalf("%d events accepted, want %d", len(by), n)
	}
	return by
}

// Durable egress across daemons: A and B publish 500 events each on one
// NATS (JetStream on disk) while the receiver is down; A is killed with
// SIGKILL while it holds deliveries it is retrying; the receiver comes up
// and A starts again. Every event is accepted exactly once, each under one
// delivery_id, by one daemon; A's deliveries, queued and in flight when it
// died, are sent by the others.
func TestJetStreamClusterSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const half = 500
	addr := testutil.FreeAddr(t)
	testutil.NATSServer(t, addr, t.TempDir())
	natsURL := "nats://" + addr
	cr := newClusterReceiver(t)

	a := startDaemon(t, "a", natsURL, cr.url(), 0, half)
	b := startDaemon(t, "b", natsURL, cr.url(), half, half)
	// Both retry against the down receiver; A holds deliveries in flight.
	tried := func(node string) map[string]bool {
		out := map[string]bool{}
		for _, r := range cr.requests() {
			if r.header.Get(nodeHeader) == node {
				out[r.msg.DeliveryID] = true
			}
		}
		return out
	}
	waitFor(t, 30*time.Second, "both daemons retrying", func() bool { return len(tried("a")) >= 20 && len(tried("b")) >= 20 })
	a.alive(t, "a")
	cr.killed.Store(int64(a.cmd.Process.Pid))
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	heldByA := tried("a")
	t.Logf("A killed holding %d deliveries it had tried; %d requests so far", len(heldByA), cr.count())

	cr.up.Store(true)
	a2 := startDaemon(t, "a", natsURL, cr.url(), 0, 0) // A again: it publishes nothing, it delivers
	deadline := time.Now().Add(45 * time.Second)
	for len(cr.accepted()) != 2*half {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events accepted after 45s; consumer: %s\nB: %s\nA again: %s", len(cr.accepted()), 2*half,
				consumerState(t, natsURL), b.stderr.String(), a2.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.alive(t, "b")
	a2.alive(t, "a")
	by := cr.check(t, 2*half)
	count := map[string]int{}
	for _, node := range by {
		count[node]++
	}
	t.Logf("accepted by: %v; %d requests in all", count, cr.count())
	if count["a"]+count["b"] != 2*half {
		t.Fatalf("accepted by %v: only a and b exist", count)
	}
	// A's deliveries that it tried before it died were all accepted, by the
	// others (B) or by A again: none was lost with the process.
	accepted := 0
	for _, r := range cr.requests() {
		if r.code/100 == 2 && heldByA[r.msg.DeliveryID] {
			accepted++
		}
	}
	if accepted != len(heldByA) {
		t.Fatalf("%d of the %d deliveries A held when killed were accepted", accepted, len(heldByA))
	}
}
