// Package dirlock is the advisory lock a process holds on its data dir's
// files that only one process may use (egress's bbolt file): a lock file
// that names its holder (pid, command, start), so that a second process
// says whom it collided with instead of timing out on the file itself.
// The kernel drops the lock when the holder dies: a lock file left behind
// by a crash holds nothing.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrHeld: another process holds the lock; the error's text names it.
var ErrHeld = errors.New("in use by another process")

// Lock is a held lock; Close releases it.
type Lock struct{ f *os.File }

// maxHolder bounds what is read of a lock file to name its holder.
const maxHolder = 1024

// TryLock takes the lock file path without waiting, creating it (and its
// directory), and writes the holder's description into it: pid, command
// line, start time. When another process holds it the error wraps ErrHeld
// and quotes that process's description.
func TryLock(path string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if held {
		holder := readHolder(f)
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrHeld, holder)
	}
	desc := fmt.Sprintf("pid %d (%s), started %s", os.Getpid(), commandLine(), time.Now().UTC().Format(time.RFC3339))
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(desc+"\n"), 0)
	}
	if err != nil {
		unlock(f)
		f.Close()
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Close releases the lock; the file stays (its content is stale from then
// on, and the next holder overwrites it).
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	unlock(l.f)
	err := l.f.Close()
	l.f = nil
	return err
}

func readHolder(f *os.File) string {
	b := make([]byte, maxHolder)
	n, _ := f.ReadAt(b, 0)
	s := strings.TrimSpace(string(b[:n]))
	if s == "" {
		return "a process that has not written its name yet"
	}
	return strings.ToValidUTF8(s, "?")
}

// commandLine is the process's program name and arguments: they name a
// config file, never a secret (secrets come from the environment).
func commandLine() string {
	args := append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)
	s := strings.Join(args, " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Wait takes the lock file path, creating it (and its directory), waiting
// up to d for another holder to release it; it writes nothing into the
// file. It is for locks held across one short step (a read and a rename)
// by any number of processes, so it polls rather than blocking in flock,
// which could not be bounded. Beyond d the error wraps ErrHeld.
func Wait(path string, d time.Duration) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		held, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !held {
			return &Lock{f: f}, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w for %s", path, ErrHeld, d)
		}
		// Backoff, not synchronisation: flock has no wakeup to wait on.
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}
