package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example does what its comment says: the host's page and an agent
// route on one mux, finished tasks logged from the lattice; and when its
// context ends it returns only after the server, the Engine and the
// subscriber have stopped (goleak checks nothing is left running).
func TestEmbed(t *testing.T) {
	var logs testutil.SyncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(ctx, "127.0.0.1:0", slog.New(slog.NewTextHandler(&logs, nil))) }()

	addrRE := regexp.MustCompile(`msg=listening addr=(\S+)`)
	var base string
	for deadline := time.Now().Add(5 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(logs.String()); m != nil {
			base = "http://" + m[1]
		}
	}
	if base == "" {
		t.Fatalf("not listening after 5s:\n%s", logs.String())
	}

	if got := get(t, base+"/"); got != "the host's own page\n" {
		t.Fatalf("GET / = %q", got)
	}
	res, err := http.Post(base+"/ask", "text/plain", strings.NewReader("what is MCP?"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "what is MCP?\n" {
		t.Fatalf("POST /ask: %d %q", res.StatusCode, body)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	if !strings.Contains(logs.String(), "type=TaskCompleted") {
		t.Fatalf("finished task not logged from the lattice:\n%s", logs.String())
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
