package otlpexport

// Gzipped is Options.gzipped, for the tests.
func Gzipped(o Options) bool { return o.gzipped() }

// MaxKeptBuffer is maxKeptBuffer, for the tests.
const MaxKeptBuffer = maxKeptBuffer

// KeptBuffer is the capacity of the encoding buffer e keeps for its next
// batch.
func KeptBuffer(e *Exporter) int {
	e.enc.Lock()
	defer e.enc.Unlock()
	return cap(e.raw)
}
