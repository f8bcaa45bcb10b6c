package otlpexport

// Gzipped is Options.gzipped, for the tests.
func Gzipped(o Options) bool { return o.gzipped() }
