package egress

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// The crash test runs the module in a child process: this test binary
// again, with these variables set.
const (
	crashChildEnv   = "EGRESS_CRASH_CHILD" // the data dir
	crashURLEnv     = "EGRESS_CRASH_URL"
	crashPublishEnv = "EGRESS_CRASH_PUBLISH" // how many events to publish
)

// crashChild is the child: it starts an Engine with egress on the data
// dir, publishes the events it is asked to, prints "stored N" once egress
// holds them all, and runs until killed.
func crashChild() int {
	n, _ := strconv.Atoi(os.Getenv(crashPublishEnv))
	eng := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	m, err := New(Config{DataDir: os.Getenv(crashChildEnv), Webhooks: []Webhook{{Name: "w", URL: os.Getenv(crashURLEnv),
		Secret: "crash", MaxAttempts: 1000, BackoffBase: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond}}})
	if err == nil {
		err = eng.Use(context.Background(), m)
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	for i := range n {
		if err := eng.Publish(context.Background(), "Deployed", "child", map[string]int{"n": i}); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	for {
		s := m.Status()[0]
		taken := s.Queued + s.InFlight + int(s.Delivered) + int(s.Failed)
		if taken >= n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println("stored", n)
	select {} // until killed
}

// Crash: 2,000 events to a receiver that is mostly down; the process is
// killed with SIGKILL while it retries; started again, with the receiver
// up, it delivers every event, each under one delivery_id.
func TestCrashLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const n = 2000
	var up atomic.Bool
	rc := newReceiver(t, "crash", func(_ received, _ int) int {
		if up.Load() || rand.IntN(10) == 0 { // down: 10% get through
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	dir := t.TempDir()
	run := func(publish int, until string) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashURLEnv+"="+rc.url(), crashPublishEnv+"="+strconv.Itoa(publish))
		stderr := &testutil.SyncBuffer{}
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		sc := bufio.NewScanner(out)
		lines := make(chan string)
		go func() {
			defer close(lines)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), until) || strings.HasPrefix(sc.Text(), "error") {
					lines <- sc.Text()
					return
				}
			}
		}()
		select {
		case line, ok := <-lines:
			if !ok || !strings.HasPrefix(line, until) {
				t.Fatalf("child: %q (stderr: %s)", line, stderr.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("child did not say %q (stderr: %s)", until, stderr.String())
		}
		return cmd, sc
	}

	first, _ := run(n, "stored")
	// Let it work through some deliveries and retries, then kill it hard.
	waitFor(t, 30*time.Second, "some attempts", func() bool { return rc.count() >= n/2 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	t.Logf("before the kill: %d requests, %d events accepted", rc.count(), len(rc.accepted()))
	if len(rc.accepted()) == n {
		t.Fatal("everything was delivered before the kill: the test proves nothing")
	}

	up.Store(true)
	second, _ := run(0, "stored")
	waitFor(t, 60*time.Second, "every event accepted", func() bool { return len(rc.accepted()) == n })
	_ = second.Process.Signal(syscall.SIGKILL)
	_ = second.Wait()
	events := eventsOf(rc.requests())
	if len(events) != n {
		t.Fatalf("%d distinct events arrived, want %d", len(events), n)
	}
	for ev, ids := range events {
		if len(ids) != 1 {
			t.Fatalf("event %s arrived under %d delivery ids", ev, len(ids))
		}
	}
}
