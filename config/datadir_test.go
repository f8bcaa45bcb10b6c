package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A relative data_dir (the default included) is the config file's
// directory's; an absolute one, and one from AXOCOATL_DATA_DIR, are kept.
func TestDataDirRelativeToConfigFile(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(t.TempDir(), "abs")
	for _, c := range []struct {
		yaml string
		env  map[string]string
		want string
	}{
		{"agents: [{id: a}]\n", nil, filepath.Join(dir, "data")},
		{"server: {data_dir: state/x}\nagents: [{id: a}]\n", nil, filepath.Join(dir, "state", "x")},
		{"server: {data_dir: " + abs + "}\nagents: [{id: a}]\n", nil, abs},
		{"agents: [{id: a}]\n", map[string]string{"AXOCOATL_DATA_DIR": "rel"}, "rel"},
	} {
		path := filepath.Join(dir, "axocoatl.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(context.Background(), LoadOptions{Path: path, Lookup: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Server.DataDir != c.want {
			t.Errorf("%q with %v: data_dir %q, want %q", c.yaml, c.env, cfg.Server.DataDir, c.want)
		}
	}
}
