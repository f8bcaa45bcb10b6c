// Package testutil holds the few test helpers that several packages of this
// module share: a buffer a child process and a test can use at once, the
// rule for peers a test cannot fetch itself (skip with how to install them,
// fail under CI), building the daemon binary, free ports, and checking an MCP
// server's agent tools with the pinned Inspector CLI.
//
// It is a normal package so that tests in any package of the module can
// import it, and internal so that nothing outside the module can. It keeps
// no state: every helper works on the testing.TB it is given, and what it
// creates (temporary directories, processes) ends with that test.
package testutil

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// SyncBuffer is a bytes.Buffer that one goroutine may write (a logger, or
// exec's goroutine copying a child's output) while another reads it. The
// zero value is an empty buffer.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// MissingPeer ends a test that needs a peer this machine lacks: it skips
// with msg, which should say how to install the peer, except when the
// environment has CI=true, where a missing peer is a failure (.ci/run
// installs every peer, so a skip there would hide a broken setup).
func MissingPeer(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// RequireCommand returns the path of the command name on PATH. Without it
// the test ends through MissingPeer, with install (how to get the command)
// in the message.
func RequireCommand(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		MissingPeer(t, name+" not found: "+install)
	}
	return path
}

// FreeAddr returns a loopback address (127.0.0.1:port) that nothing listens
// on, for a child process that must be told its port in advance. Another
// process could take the port before the child binds it; on a test machine
// that is unlikely enough, and the failure would be loud.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
