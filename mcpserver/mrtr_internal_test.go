package mcpserver

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
