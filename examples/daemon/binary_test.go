package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/httpapi"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// buildBinary compiles the daemon as users do (go build), under the race
// detector when this test runs with it.
func buildBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	return testutil.BuildDaemon(t, testutil.RaceEnabled)
}

var readyLine = regexp.MustCompile(`msg="axocoatl ready" addr=(\S+)`)

// startBinary runs the binary in an empty directory with a clean
// environment and returns its base URL once it logs that it is ready.
func startBinary(t testing.TB, bin string, env []string, args ...string) (baseURL string, cmd *exec.Cmd, stderr *testutil.SyncBuffer) {
	t.Helper()
	cmd = exec.Command(bin, args...)
	cmd.Dir = t.TempDir() // no ./axocoatl.yaml: the built-in default applies
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderr = &testutil.SyncBuffer{}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			stderr.Write([]byte(line + "\n"))
			if m := readyLine.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		close(found)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	select {
	case addr, ok := <-found:
		if !ok {
			cmd.Wait()
			t.Fatalf("daemon exited before ready:\n%s", stderr.String())
		}
		return "http://" + addr, cmd, stderr
	case <-time.After(20 * time.Second):
		t.Fatalf("daemon not ready after 20s:\n%s", stderr.String())
	}
	return "", nil, nil
}

// The built binary, on a free port with the default config, answers
// /health, runs the echo agent over HTTP and streams the resulting events.
func TestBinary(t *testing.T) {
	bin := buildBinary(t)

	t.Run("default config end to end", func(t *testing.T) {
		base, cmd, stderr := startBinary(t, bin, nil, "--addr", "127.0.0.1:0")
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get(base + "/health")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
			t.Fatalf("/health: %d %s", resp.StatusCode, body)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn := dialEvents(t, ctx, base, nil, "")

		resp, err = client.Post(base+"/api/agents/assistant/execute", "application/json", strings.NewReader(`{"input":"hello from the test"}`))
		if err != nil {
			t.Fatal(err)
		}
		var res httpapi.ExecuteResponse
		json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if resp.StatusCode != 200 || res.Output != "hello from the test" || res.Status != "completed" || res.AgentID != "assistant" {
			t.Fatalf("execute: %d %+v", resp.StatusCode, res)
		}
		var seen []string
		for len(seen) < 3 {
			f := readFrame(t, ctx, conn)
			var p struct {
				TaskID string `json:"task_id"`
				Output string `json:"output"`
			}
			json.Unmarshal(f.Event.Payload, &p)
			if f.Kind != "event" || p.TaskID != res.TaskID {
				t.Fatalf("frame %+v", f)
			}
			seen = append(seen, f.Event.Type)
			if f.Event.Type == axocoatl.EventTaskCompleted && p.Output != "hello from the test" {
				t.Fatalf("TaskCompleted payload %s", f.Event.Payload)
			}
		}
		if seen[0] != axocoatl.EventAgentActivated || seen[1] != axocoatl.EventModelResult || seen[2] != axocoatl.EventTaskCompleted {
			t.Fatalf("events %v", seen)
		}
		conn.CloseNow()

		// SIGTERM: graceful exit 0.
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	})

	// SIGTERM with streams open: each client gets its 1001 close frame
	// before the process exits, not a cut connection.
	t.Run("SIGTERM closes streams with going away", func(t *testing.T) {
		base, cmd, stderr := startBinary(t, bin, nil, "--addr", "127.0.0.1:0")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var conns []*websocket.Conn
		for range 8 {
			conns = append(conns, dialEvents(t, ctx, base, nil, ""))
		}
		cmd.Process.Signal(syscall.SIGTERM)
		for i, conn := range conns {
			_, _, err := conn.Read(ctx)
			if st := websocket.CloseStatus(err); st != websocket.StatusGoingAway {
				t.Errorf("stream %d: %v (status %v), want %v", i, err, st, websocket.StatusGoingAway)
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	})

	t.Run("public address without token refuses to start", func(t *testing.T) {
		cmd := exec.Command(bin, "--addr", "0.0.0.0:0")
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("err %v, want exit 1; output %s", err, out)
		}
		if !strings.Contains(string(out), "refusing to serve without authentication on a non-loopback address: server.addr is 0.0.0.0:0; set server.api_token (or AXOCOATL_API_TOKEN)") {
			t.Fatalf("output %s", out)
		}
		// With a token from the environment it starts.
		base, cmd2, _ := startBinary(t, bin, []string{"AXOCOATL_API_TOKEN=t0ken-0123456789abcdef"}, "--addr", "0.0.0.0:0")
		_ = base
		cmd2.Process.Signal(syscall.SIGTERM)
		cmd2.Wait()
	})

	t.Run("validate", func(t *testing.T) {
		p := writeConfig(t, "agents:\n  - id: a\n  - id: a\n")
		out, err := exec.Command(bin, "validate", "--config", p).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), p+`:3: agents[1].id: duplicate agent id "a"`) {
			t.Fatalf("err %v output %s", err, out)
		}
	})
}
