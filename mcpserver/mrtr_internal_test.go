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
// capabilities object a client may send, both readings agree.
func TestMetaFormElicitationAgreesWithSDK(t *testing.T) {
	for _, caps := range []string{
		`{}`,
		`{"elicitation":null}`,
		`{"elicitation":{}}`,
		`{"elicitation":{"form":{}}}`,
		`{"elicitation":{"form":null}}`,
		`{"elicitation":{"url":{}}}`,
		`{"elicitation":{"url":null}}`,
		`{"elicitation":{"form":{},"url":{}}}`,
		`{"elicitation":{"form":null,"url":{}}}`,
		`{"sampling":{},"roots":{"listChanged":true}}`,
		`{"elicitation":{"form":{"x":1}},"experimental":{"a":{}}}`,
	} {
		params := `{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}`
		var p mcp.CallToolParamsRaw
		if err := json.Unmarshal([]byte(params), &p); err != nil {
			t.Fatal(err)
		}
		req := &mcp.CallToolRequest{Params: &p}
		form, known := metaFormElicitation(p.GetMeta())
		if !known {
			t.Errorf("%s: not read from _meta", caps)
		}
		sdk := req.ClientCapabilities()
		want := sdk != nil && sdk.Elicitation != nil && (sdk.Elicitation.Form != nil || sdk.Elicitation.URL == nil)
		if form != want || inputCapable(req) != want {
			t.Errorf("%s: form elicitation %v from _meta, %v from the go-sdk", caps, form, want)
		}
	}
	// Absent capabilities are the go-sdk's to read.
	if _, known := metaFormElicitation(map[string]any{}); known {
		t.Error("absent capabilities read as known")
	}
}
