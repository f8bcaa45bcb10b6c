//go:build !linux

package mcpclient

import (
	"testing"
	"time"
)

// watchExits needs Linux's pidfds; the tests that use it run on Linux only.
func watchExits(t *testing.T, _ ...int) func(time.Duration) map[int]bool {
	t.Skip("pidfds are Linux's")
	return nil
}
