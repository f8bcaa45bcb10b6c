package mcpclient

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Hostile stdio servers, run as the re-executed test binary (see runHelper).

// handServer speaks just enough MCP by hand: initialize, tools/list with
// the pages list gives (a JSON array of tools and a next cursor), echo,
// and -32601 for the rest. With notify > 0 it sends
// notifications/tools/list_changed that often from the start.
func handServer(list func(cursor string) (tools string, next string), notify time.Duration) {
	var mu sync.Mutex
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	send := func(s string) {
		mu.Lock()
		out.WriteString(s)
		out.WriteByte('\n')
		out.Flush()
		mu.Unlock()
	}
	if notify > 0 {
		go func() {
			for range time.Tick(notify) {
				send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			}
		}()
	}
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.ID == nil {
			continue
		}
		var result string
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"hostile","version":"1"}}`
		case "tools/list":
			tools, next := list(msg.Params.Cursor)
			result = `{"tools":` + tools
			if next != "" {
				result += `,"nextCursor":` + strconv.Quote(next)
			}
			result += `}`
		case "tools/call":
			result = `{"content":[{"type":"text","text":"ok"}]}`
		case "ping":
			result = `{}`
		default:
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID))
			continue
		}
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result))
	}
}

// toolsJSON lists n tools named prefix0… with a description of descLen bytes.
func toolsJSON(prefix string, from, n, descLen int) string {
	var b strings.Builder
	b.WriteByte('[')
	desc := strings.Repeat("d", descLen)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"%s%d","description":"%s","inputSchema":{"type":"object"}}`, prefix, from+i, desc)
	}
	b.WriteByte(']')
	return b.String()
}

func runHostileHelper(mode string) bool {
	switch mode {
	case "endless-pages":
		// nextCursor forever, each page 5 new tools.
		handServer(func(cursor string) (string, string) {
			n, _ := strconv.Atoi(cursor)
			return toolsJSON("t", n*5, 5, 1000), strconv.Itoa(n + 1)
		}, 0)
	case "wide-tools":
		// 20 tools of 1,000-byte descriptions: 20 KB of definitions.
		page := toolsJSON("w", 0, 20, 1000)
		handServer(func(string) (string, string) { return page, "" }, 0)
	case "one-page":
		// 100,000 tools in one page (about 11 MB, under the 16 MiB
		// message bound), as a server that does not paginate sends them.
		page := toolsJSON("t", 0, 100_000, 60)
		handServer(func(string) (string, string) { return page, "" }, 0)
	case "decoy-page":
		// The one page of 100,000 tools behind a first "tools" member of
		// one tool: a decoder takes the last member of a name.
		page := toolsJSON("d", 0, 1, 60) + `,"tools":` + toolsJSON("t", 0, 100_000, 60)
		handServer(func(string) (string, string) { return page, "" }, 0)
	case "many-tools":
		// 100,000 tools in pages of 1,000 with a nextCursor, as the go-sdk
		// server pages them, each page made when asked for. A go-sdk
		// server would first spend 6 s of CPU on its 100,000 AddTool
		// calls (each decodes the tool's schema twice): over 5 minutes of
		// a loaded machine's wall clock under -race, which ended the test
		// by its handshake timeout before the client read a page.
		handServer(func(cursor string) (string, string) {
			from, _ := strconv.Atoi(cursor)
			next := ""
			if from+1000 < 100_000 {
				next = strconv.Itoa(from + 1000)
			}
			return toolsJSON("tool", from, 1000, 15), next
		}, 0)
	case "notify-flood":
		// list_changed 1,000 times a second; 200 tools listed each time.
		page := toolsJSON("t", 0, 200, 100)
		handServer(func(string) (string, string) { return page, "" }, time.Millisecond)
	case "stderr-flood":
		// A working server whose stderr never pauses.
		go func() {
			line := []byte(strings.Repeat("noise ", 15) + "\n")
			for {
				if _, err := os.Stderr.Write(line); err != nil {
					return
				}
			}
		}()
		serveStdio(0)
	case "spawner":
		// Starts a grandchild of its own, reports both pids, serves.
		gc := exec.Command(os.Args[0], "-test.run=^$", helperFlag+"sleeper")
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		_ = os.WriteFile(os.Getenv("PIDS_FILE"), fmt.Appendf(nil, "%d %d\n", os.Getpid(), gc.Process.Pid), 0o600)
		serveStdio(0)
	case "sleeper":
		time.Sleep(time.Hour)
	case "daemon":
		runDaemon()
	case "daemon-nosignal":
		runDaemonNoSignal()
	default:
		return false
	}
	return true
}
