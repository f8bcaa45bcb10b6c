//go:build !race

package testutil

// RaceEnabled reports whether this binary was built with the race detector.
const RaceEnabled = false
