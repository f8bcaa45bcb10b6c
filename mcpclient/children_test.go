package mcpclient

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// runDaemon plays the daemon: an Engine with one stdio server (the
// spawner, which starts a grandchild), then it waits to be killed.
func runDaemon() {
	e := axocoatl.New(axocoatl.Options{})
	sc := helperServer("spawner", "spawner")
	sc.Timeout = 20 * time.Second
	m, err := New(Config{Servers: []ServerConfig{sc}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := e.Use(context.Background(), m); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := m.Ready(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// processAlive reports whether pid is a live process (zombies are dead:
// they run nothing).
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// A daemon killed with SIGKILL takes its MCP server and the server's own
// child with it: no process of the tree survives. Without the parent-death
// signal the server still exits (EOF on stdin), but its child lives on.
func TestSIGKILLTakesTheTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	pidsFile := filepath.Join(t.TempDir(), "pids")
	daemon := exec.Command(os.Args[0], "-test.run=^$", helperFlag+"daemon")
	daemon.Env = append(os.Environ(), "PIDS_FILE="+pidsFile)
	out, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	daemon.Stderr = os.Stderr
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }()
	ready := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, _ := out.Read(buf)
		ready <- string(buf[:n])
	}()
	select {
	case line := <-ready:
		if !strings.Contains(line, "ready") {
			t.Fatalf("daemon said %q", line)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not ready within 60s")
	}
	raw, err := os.ReadFile(pidsFile)
	if err != nil {
		t.Fatal(err)
	}
	var server, grandchild int
	if _, err := fmt.Sscan(string(raw), &server, &grandchild); err != nil {
		t.Fatalf("pids %q: %v", raw, err)
	}
	// However the test ends, nothing is left behind.
	defer func() { _ = syscall.Kill(server, syscall.SIGKILL); _ = syscall.Kill(grandchild, syscall.SIGKILL) }()
	if !processAlive(server) || !processAlive(grandchild) {
		t.Fatalf("tree not running: server %d %v, grandchild %d %v", server, processAlive(server), grandchild, processAlive(grandchild))
	}

	// Pidfds name these very processes: a pid the kernel hands to a new
	// process (a busy machine runs many) is not mistaken for a survivor,
	// and their exits are waited for as the event they are.
	exits := watchExits(t, server, grandchild)

	if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = daemon.Wait()
	// A minute only guards a broken tree: a dying one ends in milliseconds,
	// however loaded the machine.
	alive := exits(time.Minute)
	if alive[server] {
		t.Errorf("the MCP server (pid %d) survived the daemon's SIGKILL", server)
	}
	if alive[grandchild] {
		t.Errorf("the MCP server's child (pid %d) survived the daemon's SIGKILL", grandchild)
	}
}
