package testutil

import (
	"net"
	"strings"
	"sync"
	"testing"
)

func TestSyncBufferConcurrent(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Fatalf("%d bytes, want 400", len(got))
	}
}

// recorder is a testing.TB that notes how a helper ended the test instead
// of ending it.
type recorder struct {
	testing.TB
	ended string // "skip: msg" or "fatal: msg", the first only
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	if r.ended == "" {
		r.ended = "skip: " + args[0].(string)
	}
}
func (r *recorder) Fatal(args ...any) {
	if r.ended == "" {
		r.ended = "fatal: " + args[0].(string)
	}
}

func TestRequireCommand(t *testing.T) {
	for _, tc := range []struct{ ci, want string }{
		{"", "skip: "},
		{"false", "skip: "},
		{"true", "fatal: "},
	} {
		t.Setenv("CI", tc.ci)
		r := &recorder{TB: t}
		RequireCommand(r, "axocoatl-no-such-command", "install it with: make it")
		if want := tc.want + "axocoatl-no-such-command not found: install it with: make it"; r.ended != want {
			t.Errorf("CI=%q: %q, want %q", tc.ci, r.ended, want)
		}
	}
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	if p := RequireCommand(r, "go", "install Go"); p == "" || r.ended != "" {
		t.Errorf("go: path %q, ended %q", p, r.ended)
	}
}

func TestFreeAddr(t *testing.T) {
	addr := FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("FreeAddr gave %s, which cannot be listened on: %v", addr, err)
	}
	l.Close()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("FreeAddr = %s, want a 127.0.0.1 address", addr)
	}
}
