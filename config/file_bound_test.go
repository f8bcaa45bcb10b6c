package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/config"
)

// TestConfigFileBound: a config file over the bound is refused with an
// error naming it, without being read to its end (/dev/zero never ends), and
// one just under it is parsed.
//
// Guards: the config file's size (config.MaxFileBytes).
func TestConfigFileBound(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err := config.Load(context.Background(), config.LoadOptions{Path: "/dev/zero", Lookup: noEnv})
		if !errors.Is(err, config.ErrFileTooLarge) || !strings.Contains(err.Error(), "/dev/zero") {
			t.Fatalf("Load(/dev/zero) = %v, want ErrFileTooLarge naming the file", err)
		}
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", config.MaxFileBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(context.Background(), config.LoadOptions{Path: big, Lookup: noEnv}); !errors.Is(err, config.ErrFileTooLarge) {
		t.Fatalf("Load(%d bytes) = %v, want ErrFileTooLarge", config.MaxFileBytes+3, err)
	}
	fits := filepath.Join(dir, "fits.yaml")
	body := "agents:\n  - id: a\n    model: echo\n"
	pad := "# " + strings.Repeat("x", config.MaxFileBytes-len(body)-3) + "\n"
	if err := os.WriteFile(fits, []byte(pad+body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(context.Background(), config.LoadOptions{Path: fits, Lookup: noEnv}); err != nil {
		t.Fatalf("Load(a file of exactly %d bytes) = %v", config.MaxFileBytes, err)
	}
}
