package httpguard

import (
	"encoding/json"
	"errors"
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
