// Package jsonio is the JSON I/O of every HTTP door: the error shape
// {"error":{"code","message"}}, answers, bounded request bodies read into
// a struct with errors in the client's terms.
package jsonio

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
)

// DecodeJSON reads a JSON object body into dst (the guard bounds its size
// and read time), answering the error itself (400 or 413) and returning
// false when it fails.
func DecodeJSON(w http.ResponseWriter, r *http.Request, dst any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("unexpected data after the JSON object")
			var tooBig *http.MaxBytesError
			if errors.As(extra, &tooBig) {
				err = extra // the object fit, its padding did not: still 413
			}
		}
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		WriteError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "request body over the "+Bytes(tooBig.Limit)+" limit")
	case errors.Is(err, os.ErrDeadlineExceeded):
		WriteError(w, http.StatusBadRequest, "bad_request", "request body not received in time (server.body_timeout)")
	case errors.Is(err, io.EOF):
		WriteError(w, http.StatusBadRequest, "bad_request", "request body is empty; send a JSON object")
	default:
		WriteError(w, http.StatusBadRequest, "bad_request", JSONProblem(err, "body"))
	}
	return false
}

// JSONProblem says why a client's JSON (what: "body", "frame") did
// not decode. JSON of the wrong shape is not called invalid, and is told in
// the client's terms (its member, JSON types) where encoding/json names Go
// types: `"input" must be a string, not bool`.
func JSONProblem(err error, what string) string {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return "the " + what + " must be a JSON object, not " + te.Value
	case errors.As(err, &te):
		return Quote(te.Field) + " must be " + jsonKind(te.Type) + ", not " + te.Value
	}
	// DisallowUnknownFields has no error type of its own.
	if member, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown member " + member
	}
	return "invalid JSON " + what + ": " + err.Error()
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// ErrorBody is the JSON error shape of every HTTP door.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError answers {"error":{"code","message"}} with status.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	WriteJSON(w, status, ErrorBody{ErrorDetail{Code: code, Message: msg}})
}

var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// WriteJSON answers v as JSON with status, not to be cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Quote quotes s for an error message, cut to 64 bytes.
func Quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// Bytes formats a byte count for messages: "1 MiB", "512 KiB", "100 bytes".
func Bytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
