//go:build race

package dashboard_test

// raceEnabled: this test binary runs under the race detector, so the daemon
// it builds does too (and reuses the race-built packages of the same run).
const raceEnabled = true
