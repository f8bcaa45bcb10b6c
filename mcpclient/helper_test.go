package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// helperFlag selects what the re-executed test binary plays.
const helperFlag = "-mcpclient.helper="

// meetEnv names the Unix socket the "meet" helper waits on.
const meetEnv = "MCPCLIENT_MEET"

// helperMode returns the mode this process was started in, "" for tests.
func helperMode() string {
	for _, a := range os.Args[1:] {
		if m, ok := strings.CutPrefix(a, helperFlag); ok {
			return m
		}
	}
	return ""
}

// helperServer returns a ServerConfig that runs this test binary as the
// stdio server of the given mode.
func helperServer(name, mode string) ServerConfig {
	return ServerConfig{
		Name:    name,
		Command: os.Args[0],
		Args:    []string{"-test.run=^$", helperFlag + mode},
		Env:     map[string]secretT{},
	}
}

func runHelper(mode string) {
	switch mode {
	case "server":
		serveStdio(0)
	case "conformance-client":
		conformanceClient()
	case "oauth-guard-client":
		oauthGuardClient()
	case "slow":
		serveStdio(time.Second)
	case "meet":
		// Dials the test's socket and serves once the test says all have
		// arrived (TestStartupParallel).
		c, err := net.Dial("unix", os.Getenv(meetEnv))
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			_, err = c.Read(make([]byte, 1))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "meet:", err)
			os.Exit(4)
		}
		serveStdio(0)
	case "garbage":
		fmt.Println("Welcome to my server! <html>")
		fmt.Println("{not json at all")
		waitStdin()
	case "exit":
		fmt.Fprintln(os.Stderr, "fatal: cannot start, token is", os.Getenv("SECRET_TOKEN"))
		os.Exit(3)
	case "print-inherited":
		// A child that inherits the environment can read the host's own
		// credentials, and print them (a name that does not say it is one).
		fmt.Fprintln(os.Stderr, "fatal: cannot start; the host's token is", os.Getenv("HOST_SETTING"))
		os.Exit(3)
	case "long-stderr":
		// The secret straddles the 512th byte of a line, then the end of a
		// chunk of a line longer than 4 KiB.
		tok := os.Getenv("SECRET_TOKEN")
		fmt.Fprintln(os.Stderr, strings.Repeat("x", 500)+" token="+tok)
		fmt.Fprint(os.Stderr, strings.Repeat("y", 4100)+tok[:len(tok)/2])
		time.Sleep(100 * time.Millisecond)
		fmt.Fprintln(os.Stderr, tok[len(tok)/2:])
		os.Exit(3)
	case "print-secrets":
		// A short configured secret and a credential only inherited.
		fmt.Fprintln(os.Stderr, "short="+os.Getenv("SHORT_SECRET")+" inherited="+os.Getenv("HOST_GH_TOKEN"))
		os.Exit(3)
	case "silent":
		waitStdin()
	case "hang-after-init":
		hangAfterInit()
	case "hang-after-discover":
		hangAfterDiscover("")
	case "hang-after-discover-ttl":
		// Its one tools/list says the client may cache it for an hour.
		hangAfterDiscover(`,"ttlMs":3600000`)
	case "server-2026":
		serveStdio2026()
	case "ignore-stdin":
		// Never reads, never exits on EOF or SIGTERM: only SIGKILL ends it.
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
	default:
		if runHostileHelper(mode) {
			return
		}
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		os.Exit(2)
	}
}

func waitStdin() {
	r := bufio.NewReader(os.Stdin)
	for {
		if _, err := r.ReadString('\n'); err != nil {
			return
		}
	}
}

// hangAfterInit speaks just enough MCP by hand to be connected and listed
// (an echo tool), then stays alive reading stdin and answers nothing more,
// pings included: a hung server that never exits.
func hangAfterInit() {
	r := bufio.NewReader(os.Stdin)
	listed := false
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.ID == nil || listed {
			continue // notifications, and everything once hung
		}
		var result string
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hang","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
			listed = true
		default: // server/discover and anything else before the hang
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", msg.ID)
			continue
		}
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", msg.ID, result)
	}
}

// hangAfterDiscover is hangAfterInit in the 2026-07-28 era: it answers
// server/discover (that version only) and one tools/list, then nothing:
// a hung server that never exits, and that no ping can reveal (that era
// has none). ttl is added to its tools/list result.
func hangAfterDiscover(ttl string) {
	r := bufio.NewReader(os.Stdin)
	listed := false
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.ID == nil || listed {
			continue
		}
		var result string
		switch msg.Method {
		case "server/discover":
			result = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`
		case "tools/list":
			result = `{"resultType":"complete","tools":[{"name":"echo","inputSchema":{"type":"object"}}]` + ttl + `}`
			listed = true
		default:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", msg.ID)
			continue
		}
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", msg.ID, result)
	}
}

// legacyIgnoresUnknown is a 2025-11-25 server written by hand that never
// answers a request it does not know (server/discover included), as some
// older servers do: initialize, tools/list, an echo tools/call and ping
// only. It serves newline-delimited JSON-RPC from in to out until in ends.
func legacyIgnoresUnknown(in io.Reader, out io.Writer) {
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Message string `json:"message"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.ID == nil {
			continue
		}
		var result string
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"old","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			text, _ := json.Marshal("Echo: " + msg.Params.Arguments.Message)
			result = `{"content":[{"type":"text","text":` + string(text) + `}]}`
		case "ping":
			result = `{}`
		default:
			continue // never answered
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", msg.ID, result)
	}
}

// legacyServer is legacyIgnoresUnknown served in this process over two
// pipes, the bytes a stdio child would exchange: the handshake's timeout,
// which the tests keep short because the unanswered probe waits all of it,
// then times the exchange only, not a child's start (over 500 ms on a
// loaded machine under -race). Its goroutine ends when the client closes.
func legacyServer(name string, timeout time.Duration) ServerConfig {
	return ServerConfig{Name: name, Timeout: timeout, Dial: func(context.Context) (mcp.Transport, error) {
		c2sR, c2sW := io.Pipe()
		s2cR, s2cW := io.Pipe()
		go func() {
			legacyIgnoresUnknown(c2sR, s2cW)
			_ = s2cW.Close()
		}()
		return &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil
	}}
}

// only2026Server is a go-sdk server that speaks MCP 2026-07-28 and no
// older version, with an echo tool.
func only2026Server() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "new-era", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: []string{"2026-07-28"},
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
	})
	return srv
}

// serveStdio2026 serves only2026Server on stdin/stdout.
func serveStdio2026() {
	_ = only2026Server().Run(context.Background(), &mcp.StdioTransport{})
}

// serveStdio serves a go-sdk server on stdin/stdout after a delay (a slow
// server becoming ready).
func serveStdio(delay time.Duration) {
	time.Sleep(delay)
	srv := mcp.NewServer(&mcp.Implementation{Name: "helper", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "env"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		var names []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			names = append(names, k)
		}
		slices.Sort(names)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(names, " ")}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "getenv"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Name string `json:"name"`
	}) (*mcp.CallToolResult, map[string]string, error) {
		v := os.Getenv(in.Name)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Name + "=" + v}}}, map[string]string{in.Name: v}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "pid"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
	})
	_ = srv.Run(context.Background(), &mcp.StdioTransport{})
}

// processGroupAlive reports whether a live (not zombie) process of the
// group is left. Zombies count as gone: they run nothing, and in a
// container without an init that reaps orphans they never disappear.
func processGroupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil // no /proc: zombies count as alive
	}
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may contain spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) >= 3 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// groupDies reports whether every live process of the group is gone
// within 2s: a SIGKILL sent to a group is delivered at once, but a
// process (a race-built binary under the Linux shim) takes a moment to
// exit.
func groupDies(pgid int) bool {
	deadline := time.Now().Add(2 * time.Second)
	for processGroupAlive(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
