package a2awire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
)

// AppendEvent appends data (one line of JSON, no newline in it) to b as one
// SSE event: a single data line and the blank line that ends the event.
func AppendEvent(b, data []byte) []byte {
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}

// Events yields the data of each event of an SSE stream (its data: lines
// joined by newlines), as a2a-go's internal/sse does; other fields (id:,
// event:, retry:) and comments are skipped. A line or an event longer than
// limit bytes ends the stream with an error that wraps tooLarge.
func Events(body io.Reader, limit int64, tooLarge error) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		sc := bufio.NewScanner(body)
		// The buffer's capacity is a bound too (Scanner takes the larger).
		sc.Buffer(make([]byte, 0, min(4096, limit)), int(min(limit, int64(1<<31-1))))
		var event bytes.Buffer
		flush := func() bool {
			if event.Len() == 0 {
				return true
			}
			data := bytes.Clone(event.Bytes())
			event.Reset()
			return yield(data, nil)
		}
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				if !flush() {
					return
				}
				continue
			}
			data, ok := bytes.CutPrefix(line, []byte("data:"))
			if !ok {
				continue // id:, event:, retry: and comments
			}
			data = bytes.TrimPrefix(data, []byte(" "))
			if event.Len() > 0 {
				event.WriteByte('\n')
			}
			if int64(event.Len()+len(data)) > limit {
				yield(nil, fmt.Errorf("%w: an SSE event of more than %d bytes", tooLarge, limit))
				return
			}
			event.Write(data)
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("%w: an SSE line of more than %d bytes", tooLarge, limit)
			}
			yield(nil, fmt.Errorf("reading the event stream: %w", err))
			return
		}
		flush()
	}
}
