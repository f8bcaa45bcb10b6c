package testutil

import (
	"testing"
	"time"
)

// PairedTimes is [Paired] for sides that time themselves (a first delta,
// a whole stream): x and y once each per b.Loop iteration, alternating
// which goes first; it returns what each call returned, in order.
func PairedTimes(b *testing.B, x, y func() time.Duration) (xs, ys []time.Duration) {
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			xs = append(xs, x())
			ys = append(ys, y())
		} else {
			ys = append(ys, y())
			xs = append(xs, x())
		}
		n++
	}
	return xs, ys
}

// FirstDelta is the time-to-first-delta benchmark of a door: door and
// model (the model server's own first delta) paired ([PairedTimes]); it
// reports the medians as door-first-delta-µs, model-first-delta-µs and
// added-µs, and fails when over 20 runs or more the door's median comes
// more than bar after the model's (what names the door's delta in the
// failure: "the socket's first delta").
func FirstDelta(b *testing.B, what string, door, model func() time.Duration, bar time.Duration) {
	doorTimes, modelTimes := PairedTimes(b, door, model)
	d, m := Median(doorTimes), Median(modelTimes)
	b.ReportMetric(float64(d.Microseconds()), "door-first-delta-µs")
	b.ReportMetric(float64(m.Microseconds()), "model-first-delta-µs")
	b.ReportMetric(float64((d - m).Microseconds()), "added-µs")
	if n := len(doorTimes); n >= 20 && d-m > bar {
		b.Fatalf("%s came %s after the model's (medians %s and %s over %d runs); the bar is %s", what, d-m, d, m, n, bar)
	}
}
