package boltstore_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/boltstore"
)

// crashWriters is how many conversations the killed process appends to
// at once.
const crashWriters = 4

// TestAppendProcess is the process TestKillMidWrite kills: it appends
// turns to crashWriters conversations as fast as it can, printing "ACK
// <conversation> <turn>" once each Append has returned (committed).
func TestAppendProcess(t *testing.T) {
	path := os.Getenv("BOLTSTORE_CRASH_FILE")
	if path == "" {
		t.Skip("run by TestKillMidWrite only")
	}
	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range crashWriters {
		id := fmt.Sprintf("c%d", w)
		if err := s.Create(ctx, conversation.Info{ID: id, AgentID: "a"}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				// A few KiB a turn, so that commits span pages.
				if err := s.Append(ctx, id, turn(fmt.Sprintf("%d %s", i, strings.Repeat("x", 3000)))); err != nil {
					fmt.Println("ERR", err)
					return
				}
				out.Lock()
				fmt.Printf("ACK %s %d\n", id, i)
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestKillMidWrite kills (SIGKILL) a process in the middle of its writes:
// the file opens, and every turn whose Append had returned is there,
// whole and in order; at most the turns in flight are missing.
func TestKillMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a process; skipped with -short")
	}
	path := filepath.Join(t.TempDir(), boltstore.FileName)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAppendProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BOLTSTORE_CRASH_FILE="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]int{}
	sc := bufio.NewScanner(stdout)
	total := 0
	deadline := time.Now().Add(2 * time.Minute)
	for total < 200 && sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "ACK" {
			n, _ := strconv.Atoi(f[2])
			acked[f[1]] = n + 1
			total++
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if total < 200 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the writer acknowledged %d turns before it stopped, want 200", total)
	}
	// Killed while its writers are mid-Append.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatalf("the store does not open after SIGKILL: %v", err)
	}
	defer s.Close()
	for w := range crashWriters {
		id := fmt.Sprintf("c%d", w)
		msgs, err := s.Messages(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs)%2 != 0 || info.Messages != len(msgs) {
			t.Fatalf("%s: %d messages, Info says %d: a turn was cut", id, len(msgs), info.Messages)
		}
		if got := len(msgs) / 2; got < acked[id] {
			t.Fatalf("%s: %d turns on disk, %d were acknowledged before the kill", id, got, acked[id])
		}
		for i := 0; i < len(msgs); i += 2 {
			if !strings.HasPrefix(msgs[i].Content, fmt.Sprintf("%d ", i/2)) || msgs[i+1].Content != "answer to "+msgs[i].Content {
				t.Fatalf("%s: turn %d is %q / %q", id, i/2, msgs[i].Content[:10], msgs[i+1].Content[:20])
			}
		}
	}
	t.Logf("acknowledged before the kill: %v", acked)
}
