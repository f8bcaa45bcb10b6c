package config

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// A flood of NATS errors (a peer making this daemon a slow consumer, burst
// after burst) is one log line per interval, which counts the others.
func TestNATSErrorsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	// 2 s: the burst of 1,000 calls must fall within one interval, and a
	// loaded machine (-race, other work on 2 cores) stretched it past
	// 200 ms.
	const interval = 2 * time.Second
	h := natsErrorLogger(slog.New(slog.NewTextHandler(&buf, nil)), interval)
	sub := &natsgo.Subscription{Subject: "ct-cluster.exec.echo"}
	for range 1000 {
		h(nil, sub, natsgo.ErrSlowConsumer)
	}
	if n := strings.Count(buf.String(), "NATS error"); n != 1 {
		t.Fatalf("%d lines for 1000 errors in a burst:\n%s", n, buf.String())
	}
	time.Sleep(interval + 50*time.Millisecond) // the interval is what is tested
	h(nil, sub, natsgo.ErrSlowConsumer)
	h(nil, nil, errors.New("write to nats://user:pw@host:4222 failed"))
	out := buf.String()
	if n := strings.Count(out, "NATS error"); n != 3 || !strings.Contains(out, "not_logged_since_last=999") ||
		!strings.Contains(out, "subject=ct-cluster.exec.echo") || strings.Contains(out, "pw@") {
		t.Fatalf("after the interval:\n%s", out)
	}
}

// A flood of one error (slow consumer) does not hide another: a
// permissions violation right after it is logged at once (an operator
// restricting who may publish under the cluster's subjects needs to see
// it), and each error's count is its own.
func TestNATSErrorFloodHidesNoOtherError(t *testing.T) {
	var buf bytes.Buffer
	h := natsErrorLogger(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	sub := &natsgo.Subscription{Subject: "ct-cluster.exec.echo"}
	for range 100 {
		h(nil, sub, natsgo.ErrSlowConsumer)
	}
	h(nil, nil, errors.New(`nats: permissions violation for publish to "ct-cluster.exec.echo"`))
	out := buf.String()
	if n := strings.Count(out, "NATS error"); n != 2 || !strings.Contains(out, "permissions violation") {
		t.Fatalf("a permissions violation after a slow-consumer flood:\n%s", out)
	}
	// Many distinct errors stay bounded: at most one line each for the
	// first few kinds, then one for all the others together.
	buf.Reset()
	for i := range 1000 {
		h(nil, nil, errors.New("nats: odd error "+strings.Repeat("x", i%500)))
	}
	if n := strings.Count(buf.String(), "NATS error"); n > natsErrorKinds+1 {
		t.Fatalf("%d lines for 500 distinct errors", n)
	}
}
