//go:build race

package testutil

// RaceEnabled reports whether this binary was built with the race detector:
// a test that builds the daemon passes it to BuildDaemon, so the daemon runs
// under the detector too (and reuses the race-built packages of the run).
const RaceEnabled = true
