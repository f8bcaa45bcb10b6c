package mcpserver

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Processes on one data dir (serve and mcp serve) share one requestState
// key: made once, 0600, never read half written, whoever comes first.
func TestStateKeySharedAndPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", StateKeyFile)
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := loadOrCreateKey(path)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys {
		if len(k) != 32 || !bytes.Equal(k, keys[0]) {
			t.Fatalf("keys differ: %x vs %x", k, keys[0])
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "sub", "*.tmp"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreateKey(path); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

// metaFormElicitation reads a request's _meta as the go-sdk's
// ClientCapabilities does, without decoding it again: for each
// capabilities object a client may send, both readings agree, and the
// capabilities the go-sdk accepts are read from _meta (not decoded again).
func TestMetaFormElicitationAgreesWithSDK(t *testing.T) {
	for _, c := range []struct {
		caps string
		fast bool // read from _meta without the go-sdk
	}{
		{`{}`, true},
		{`{"elicitation":null}`, true},
		{`{"elicitation":{}}`, true},
		{`{"elicitation":{"form":{}}}`, true},
		{`{"elicitation":{"form":null}}`, true},
		{`{"elicitation":{"url":{}}}`, true},
		{`{"elicitation":{"url":null}}`, true},
		{`{"elicitation":{"form":{},"url":{}}}`, true},
		{`{"elicitation":{"form":null,"url":{}}}`, true},
		{`{"sampling":{},"roots":{"listChanged":true}}`, true},
		{`{"elicitation":{"form":{"x":1}},"experimental":{"a":{}}}`, true},
		// Not capabilities the go-sdk decodes (it refuses such a call
		// before its tool runs): left to its reading.
		{`{"elicitation":{"form":false}}`, false},
		{`{"elicitation":{"url":"x"}}`, false},
		{`{"elicitation":[]}`, false},
		{`{"elicitation":5}`, false},
	} {
		params := `{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + c.caps + `}}`
		var p mcp.CallToolParamsRaw
		if err := json.Unmarshal([]byte(params), &p); err != nil {
			t.Fatal(err)
		}
		req := &mcp.CallToolRequest{Params: &p}
		_, known := metaFormElicitation(p.GetMeta())
		if known != c.fast {
			t.Errorf("%s: read from _meta %v, want %v", c.caps, known, c.fast)
		}
		sdk := req.ClientCapabilities()
		want := sdk != nil && sdk.Elicitation != nil && (sdk.Elicitation.Form != nil || sdk.Elicitation.URL == nil)
		if got := inputCapable(req); got != want {
			t.Errorf("%s: form elicitation %v, the go-sdk reads %v", c.caps, got, want)
		}
	}
	// Absent capabilities are the go-sdk's to read.
	if _, known := metaFormElicitation(map[string]any{}); known {
		t.Error("absent capabilities read as known")
	}
}
