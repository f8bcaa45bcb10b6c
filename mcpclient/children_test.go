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
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// runDaemonNoSignal plays a daemon whose shim never gets the parent-death
// signal: the spawner started as mcpclient starts a stdio server (the shim,
// its own process group), with Pdeathsig cleared, and an MCP handshake over
// its pipes. What ends the tree when this process dies is then the shim's
// own look at its parent once the server has exited on EOF, the path a
// loaded machine takes when the server and the shim are quicker than the
// dying daemon's signal.
func runDaemonNoSignal() {
	cmd := dieWithParent(exec.Command(os.Args[0], "-test.run=^$", helperFlag+"spawner"))
	cmd.SysProcAttr.Pdeathsig = 0
	setProcessGroup(cmd)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Connected: the spawner has written its pids and serves.
	c := mcp.NewClient(&mcp.Implementation{Name: "daemon", Version: "1"}, nil)
	if _, err := c.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// A daemon killed with SIGKILL takes its MCP server and the server's own
// child with it: no process of the tree survives. Without the parent-death
// signal the server still exits (EOF on stdin), but its child lives on.
func TestSIGKILLTakesTheTree(t *testing.T) { testTreeDiesWithDaemon(t, "daemon") }

// The shim does not rely on the parent-death signal alone: a dying
// process's files close before it signals its children, so the server
// (EOF on stdin) and the shim after it can exit first, and the signal
// then reaches no one; the server's child survived (4 of 100 runs of
// TestSIGKILLTakesTheTree with the daemon's threads reniced beside 6 busy
// loops). Here the signal never comes: the shim, seeing its server gone
// and its parent dying, must end the group itself.
func TestShimEndsTheTreeWithoutTheSignal(t *testing.T) { testTreeDiesWithDaemon(t, "daemon-nosignal") }

// testTreeDiesWithDaemon starts the helper mode, a daemon with a spawner
// below it that started a child, kills the daemon with SIGKILL and fails
// t if the spawner or its child outlives it.
func testTreeDiesWithDaemon(t *testing.T, mode string) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	if _, err := os.Stat(shell); err != nil {
		t.Skip("no " + shell + ": no shim")
	}
	pidsFile := filepath.Join(t.TempDir(), "pids")
	daemon := exec.Command(os.Args[0], "-test.run=^$", helperFlag+mode)
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

	// The daemon's threads become the least urgent on the machine, as a
	// loaded machine makes some of them: its last steps of dying then
	// often come after its server's and the shim's, the race above
	// (harmless on an idle machine, which has no one to run first).
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", daemon.Process.Pid))
	for _, task := range tasks {
		if tid, err := strconv.Atoi(task.Name()); err == nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, 19)
		}
	}
	if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The daemon is reaped only after: its pid, the shim's parent, stays
	// its own (a zombie) while the shim looks at it.
	//
	// A minute only guards a broken tree: a dying one ends in milliseconds,
	// however loaded the machine.
	alive := exits(time.Minute)
	_ = daemon.Wait()
	if alive[server] {
		t.Errorf("the MCP server (pid %d) survived the daemon's SIGKILL", server)
	}
	if alive[grandchild] {
		t.Errorf("the MCP server's child (pid %d) survived the daemon's SIGKILL", grandchild)
	}
}
