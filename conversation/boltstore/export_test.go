package boltstore

// EncodeMessage is encodeMessage, for the benchmark's raw bbolt writes of
// the same bytes.
var EncodeMessage = encodeMessage
