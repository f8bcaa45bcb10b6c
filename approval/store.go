package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/dirlock"
)

// StoreFile is the name of the file in [Config].DataDir that holds
// remembered decisions ([Remembered]).
const StoreFile = "approvals.json"

// lockSuffix names the lock file beside [StoreFile] that every process
// writing it holds across its re-read and rename; storeLockWait bounds how
// long a write waits for another process's (each holds it for one write).
const (
	lockSuffix    = ".lock"
	storeLockWait = 10 * time.Second
)

// Remembered is a decision a human asked to keep ("remember": "always") for
// one agent's calls of one tool. It applies only while the tool's
// fingerprint is the one it was given for: a tool whose name, description
// or schema changed is asked about again.
type Remembered struct {
	AgentID     string    `json:"agent_id"`
	Tool        string    `json:"tool"`
	Fingerprint string    `json:"fingerprint"`
	Decision    string    `json:"decision"` // allow or deny
	DecidedAt   time.Time `json:"decided_at"`
	ResolvedBy  string    `json:"resolved_by"`
	ApprovalID  string    `json:"approval_id"`
}

type decisionKey struct{ agent, tool string }

// store holds remembered decisions: readers take a snapshot without a lock
// (the map is replaced, never changed), writers are serialized and write
// the file before publishing the new map.
type store struct {
	file string // "" when there is no data dir
	mu   sync.Mutex
	m    atomic.Pointer[map[decisionKey]Remembered]
	// seen is the file as m was read from it (nil: none was), so that a
	// file another process replaced since is read again before a decision
	// is applied: a revocation there must not keep allowing a call here.
	seen atomic.Pointer[os.FileInfo]
}

type storeFile struct {
	Version   int          `json:"version"`
	Decisions []Remembered `json:"decisions"`
}

func newStore(dataDir string) *store {
	s := &store{}
	if dataDir != "" {
		s.file = filepath.Join(dataDir, StoreFile)
	}
	empty := map[decisionKey]Remembered{}
	s.m.Store(&empty)
	return s
}

// load reads the file; a missing file is an empty store.
func (s *store) load() error {
	if s.file == "" {
		return nil
	}
	f, err := os.Open(s.file)
	if errors.Is(err, os.ErrNotExist) {
		empty := map[decisionKey]Remembered{}
		s.m.Store(&empty)
		s.seen.Store(nil)
		return nil
	}
	if err != nil {
		return fmt.Errorf("approval: read remembered decisions: %w", err)
	}
	defer f.Close()
	// Stat the file read, not the path: a rename meanwhile then only
	// costs one more read.
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("approval: read remembered decisions: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("approval: read remembered decisions: %w", err)
	}
	var sf storeFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return fmt.Errorf("approval: %s is not a decisions file: %w", s.file, err)
	}
	m := make(map[decisionKey]Remembered, len(sf.Decisions))
	for _, r := range sf.Decisions {
		if r.Tool == "" || (r.Decision != Allow && r.Decision != Deny) {
			continue
		}
		m[decisionKey{r.AgentID, r.Tool}] = r
	}
	s.m.Store(&m)
	s.seen.Store(&fi)
	return nil
}

// refresh reads the file again when another process has replaced it (or
// removed it) since it was read: one stat per look-up. A file that cannot
// be read now leaves what was read before (writes are atomic, so that is
// a transient state).
func (s *store) refresh() {
	if s.file == "" {
		return
	}
	fi, err := os.Stat(s.file)
	seen := s.seen.Load()
	switch {
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return
	case err != nil && seen == nil: // still no file
		return
	case err == nil && seen != nil && os.SameFile(fi, *seen) && fi.ModTime().Equal((*seen).ModTime()) && fi.Size() == (*seen).Size():
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.load()
}

func (s *store) get(agent, tool string) (Remembered, bool) {
	s.refresh()
	m := *s.m.Load()
	if len(m) == 0 {
		return Remembered{}, false
	}
	r, ok := m[decisionKey{agent, tool}]
	return r, ok
}

func (s *store) list() []Remembered {
	s.refresh()
	out := slices.Collect(maps.Values(*s.m.Load()))
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(out, func(i, j int) bool {
		if out[i].AgentID != out[j].AgentID {
			return out[i].AgentID < out[j].AgentID
		}
		return out[i].Tool < out[j].Tool
	})
	return out
}

func (s *store) put(r Remembered) error {
	return s.update(func(m map[decisionKey]Remembered) bool {
		m[decisionKey{r.AgentID, r.Tool}] = r
		return true
	})
}

// remove deletes the decision; it reports whether there was one.
func (s *store) remove(agent, tool string) (bool, error) {
	found := false
	err := s.update(func(m map[decisionKey]Remembered) bool {
		k := decisionKey{agent, tool}
		_, found = m[k]
		delete(m, k)
		return found
	})
	return found, err
}

// update applies change to a copy, writes the file, then publishes the copy:
// what readers see is always on disk.
func (s *store) update(change func(map[decisionKey]Remembered) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Another process on the data dir (`mcp serve` beside the daemon) may
	// have written the file since: change what is on disk, not only what
	// this process read, so that neither drops the other's decisions. The
	// lock file makes the re-read and the rename one step across processes:
	// without it a write landing between them was lost.
	if s.file != "" {
		l, err := dirlock.Wait(s.file+lockSuffix, storeLockWait)
		if err != nil {
			return fmt.Errorf("approval: remembered decisions: %w", err)
		}
		defer l.Close()
	}
	if err := s.load(); err != nil {
		return err
	}
	m := maps.Clone(*s.m.Load())
	if !change(m) {
		return nil
	}
	if err := s.write(m); err != nil {
		return err
	}
	s.m.Store(&m)
	return nil
}

// write replaces the file atomically: a temp file in the same directory,
// synced, then renamed over the old one.
func (s *store) write(m map[decisionKey]Remembered) error {
	if s.file == "" {
		return nil
	}
	f := storeFile{Version: 1, Decisions: slices.Collect(maps.Values(m))}
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(f.Decisions, func(i, j int) bool {
		a, b := f.Decisions[i], f.Decisions[j]
		return a.AgentID+"\x00"+a.Tool < b.AgentID+"\x00"+b.Tool
	})
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("approval: data dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".approvals-*.tmp")
	if err != nil {
		return fmt.Errorf("approval: write remembered decisions: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("approval: write remembered decisions: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("approval: write remembered decisions: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("approval: write remembered decisions: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.file); err != nil {
		return fmt.Errorf("approval: write remembered decisions: %w", err)
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		_ = d.Sync()
		d.Close()
	}
	return nil
}
