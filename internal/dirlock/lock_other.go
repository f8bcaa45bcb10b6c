//go:build !unix

package dirlock

import "os"

// Without flock the lock file only names the last holder; the exclusive
// files' own locks (bbolt's) still refuse a second process.
func tryLock(*os.File) (bool, error) { return false, nil }

func unlock(*os.File) {}
