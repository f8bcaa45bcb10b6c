package a2awire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// errTooLarge is the bound's error the tests give Events.
var errTooLarge = errors.New("over the bound")

// Events joins an event's data lines, skips other fields and comments,
// and ends with the bound's error at a line or an event over its bound
// (which a2aremote's transports set to max_response_bytes, so that the
// body's own bound is normally met first: TestTransports03Answers).
func TestEvents(t *testing.T) {
	read := func(body string, limit int64) ([]string, error) {
		var got []string
		for data, err := range Events(strings.NewReader(body), limit, errTooLarge) {
			if err != nil {
				return got, err
			}
			got = append(got, string(data))
		}
		return got, nil
	}
	got, err := read(": hi\nid: 1\nevent: x\ndata: {\"a\":\ndata:1}\n\nretry: 5\ndata: two\n\ndata: last", 100)
	if err != nil || strings.Join(got, "|") != "{\"a\":\n1}|two|last" {
		t.Fatalf("events %q, error %v", got, err)
	}
	for _, body := range []string{"data: " + strings.Repeat("x", 200) + "\n\n", strings.Repeat("data: "+strings.Repeat("y", 40)+"\n", 5)} {
		got, err = read("data: first\n\n"+body, 100)
		if !errors.Is(err, errTooLarge) || !strings.Contains(err.Error(), "more than 100 bytes") || len(got) != 1 {
			t.Fatalf("events %q, error %v; want the first event, then errTooLarge", got, err)
		}
	}
}

// Events' line bound holds below 4 KiB too: bufio.Scanner takes the
// larger of its buffer's capacity (4096) and the limit as its bound, so a
// 4,000-byte comment line passed a limit of 100.
func TestEventsLineBoundBelowBuffer(t *testing.T) {
	body := ": " + strings.Repeat("c", 4000) + "\n\ndata: x\n\n"
	var got []string
	var err error
	for data, e := range Events(strings.NewReader(body), 100, errTooLarge) {
		if e != nil {
			err = e
			break
		}
		got = append(got, string(data))
	}
	if !errors.Is(err, errTooLarge) || len(got) != 0 {
		t.Fatalf("events %q, error %v; want errTooLarge at the 4,002-byte line", got, err)
	}
}

// What AppendEvent writes, Events reads back event by event, whatever the
// JSON holds (newlines inside strings are escaped, so one line it stays).
func TestAppendEventReadBack(t *testing.T) {
	want := []string{`{"a":1}`, `{"text":"two\nlines: data: x"}`, `{}`}
	var stream []byte
	for _, w := range want {
		stream = AppendEvent(stream, []byte(w))
	}
	var got []string
	for data, err := range Events(bytes.NewReader(stream), 1<<10, errTooLarge) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(data))
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("read back %q, want %q", got, want)
	}
}
