package testutil

import (
	"slices"
	"testing"
	"time"
)

// Median is the median of ds, 0 for none; ds is left as it is.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Paired is a paired benchmark's loop: engine and direct once each per
// b.Loop iteration, alternating which goes first, so that both see the
// same moment of a noisy machine. It reports engine-ns/call and
// direct-ns/call, the ratio of their total times (engine/direct) and of
// their per-call medians (median-engine/direct), which shrug off GC pauses
// and scheduler hiccups that land on one side.
func Paired(b *testing.B, engine, direct func()) {
	var engineTime, directTime time.Duration
	var engineCalls, directCalls []time.Duration
	timed := func(f func(), total *time.Duration, calls *[]time.Duration) {
		start := time.Now()
		f()
		d := time.Since(start)
		*total += d
		*calls = append(*calls, d)
	}
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			timed(engine, &engineTime, &engineCalls)
			timed(direct, &directTime, &directCalls)
		} else {
			timed(direct, &directTime, &directCalls)
			timed(engine, &engineTime, &engineCalls)
		}
		n++
	}
	b.ReportMetric(float64(engineTime.Nanoseconds())/float64(n), "engine-ns/call")
	b.ReportMetric(float64(directTime.Nanoseconds())/float64(n), "direct-ns/call")
	b.ReportMetric(float64(engineTime)/float64(directTime), "engine/direct")
	b.ReportMetric(float64(Median(engineCalls))/float64(Median(directCalls)), "median-engine/direct")
}
