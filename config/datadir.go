package config

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/axocoatl/axocoatl-go/internal/dirlock"
)

// LockFile is the file in server.data_dir that the process owning the data
// dir's exclusive files holds (see LockDataDir).
const LockFile = "axocoatl.lock"

// resolveDataDir makes a relative server.data_dir (the default ./data
// included) relative to the directory of the config file it came from, so
// that a process started elsewhere (an MCP client starts `mcp serve` in its
// own working directory) finds the same data. A data dir from
// AXOCOATL_DATA_DIR, or with the built-in config, stays relative to the
// working directory.
func (c *Config) resolveDataDir() {
	if c.Source == BuiltinSource || c.overrides["server.data_dir"] != "" || filepath.IsAbs(c.Server.DataDir) {
		return
	}
	dir := filepath.Dir(c.Source)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	c.Server.DataDir = filepath.Join(dir, c.Server.DataDir)
}

// DataDirLock is a process's hold on its data dir; Close releases it.
type DataDirLock struct{ l *dirlock.Lock }

// Close releases the lock.
func (l *DataDirLock) Close() error {
	if l == nil {
		return nil
	}
	return l.l.Close()
}

// LockDataDir takes server.data_dir's lock file (LockFile) without waiting:
// the process that holds it owns the files only one process may use, the
// webhook deliveries' egress.db. A second holder fails at once, naming the
// first one (pid, command, start). Remembered approvals (approvals.json)
// are not exclusive: a process built with BuildOptions.SharedDataDir (`mcp
// serve`) shares them with the holder and takes no lock. On the NATS
// lattice nothing of the data dir is exclusive (webhooks queue in
// JetStream) and LockDataDir takes no lock (nil, nil).
func (c *Config) LockDataDir() (*DataDirLock, error) {
	if c.Lattice.Backend == "nats" {
		return nil, nil
	}
	dir := c.Server.DataDir
	l, err := dirlock.TryLock(filepath.Join(dir, LockFile))
	if errors.Is(err, dirlock.ErrHeld) {
		return nil, fmt.Errorf("data dir %s is %w: give this process its own server.data_dir (or AXOCOATL_DATA_DIR), or run both on one NATS lattice (lattice.backend: nats), where they share the webhooks' queue; `axocoatl mcp serve` may run beside it on this data dir", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	return &DataDirLock{l: l}, nil
}
