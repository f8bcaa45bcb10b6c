package mcpclient

import (
	"context"
	"testing"
	"time"
)

// Once a child has been waited for and its group killed, the dialer forgets
// its process group: Stop (or the next failure) would otherwise SIGKILL
// -pgid long after, an id the kernel may by then have given to another
// process group (the next MCP child, also a group leader, for one).
func TestReapForgetsDeadChild(t *testing.T) {
	sc := helperServer("kid", "server")
	_, m := startModule(t, Config{Servers: []ServerConfig{sc}, MinBackoff: time.Hour}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	s := m.servers[0]
	pid := s.dial.pid()
	if pid == 0 {
		t.Fatal("no child pid while connected")
	}
	killProcessGroup(pid)
	waitFor(t, 5*time.Second, func() bool { return !m.Status()[0].Connected })
	// The supervisor is now in its hour of backoff, the child reaped.
	if got := s.dial.pid(); got != 0 {
		t.Fatalf("the dialer still targets process group %d of a child that is gone", got)
	}
}
