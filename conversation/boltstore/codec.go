package boltstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
)

// A message on disk is a version byte, a flags byte (bit 0: IsError), At
// as varint Unix nanoseconds, then Role, Content, ToolCallID and TaskID
// as uvarint-length-prefixed bytes, the number of tool calls and each
// call's ID, Name and Arguments the same way. Every turn reads the
// conversation's history back: decoding this takes one string allocation
// per message (its fields share it) where encoding/json took about ten,
// and a fifth of the time.
const codecV1 = 1

var errCorrupt = errors.New("malformed message record")

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encodeMessage is m's record.
func encodeMessage(m conversation.Message) []byte {
	n := 16 + len(m.Role) + len(m.Content) + len(m.ToolCallID) + len(m.TaskID)
	for _, c := range m.ToolCalls {
		n += 8 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	b := make([]byte, 0, n)
	var flags byte
	if m.IsError {
		flags |= 1
	}
	b = append(b, codecV1, flags)
	b = binary.AppendVarint(b, m.At.UnixNano())
	b = appendField(b, string(m.Role))
	b = appendField(b, m.Content)
	b = appendField(b, m.ToolCallID)
	b = appendField(b, m.TaskID)
	b = binary.AppendUvarint(b, uint64(len(m.ToolCalls)))
	for _, c := range m.ToolCalls {
		b = appendField(b, c.ID)
		b = appendField(b, c.Name)
		b = appendField(b, string(c.Arguments))
	}
	return b
}

// decoder reads fields of one record from s, a copy of it (the record
// itself lives in bbolt's mmap, valid only during the transaction).
type decoder struct {
	s   string
	i   int
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.i >= len(d.s) {
			break
		}
		c := d.s[d.i]
		d.i++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	d.err = errCorrupt
	return 0
}

func (d *decoder) field() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.s)-d.i) {
		d.err = errCorrupt
		return ""
	}
	f := d.s[d.i : d.i+int(n)]
	d.i += int(n)
	return f
}

// decodeMessage reads a record of encodeMessage.
func decodeMessage(v []byte) (conversation.Message, error) {
	if len(v) < 3 || v[0] != codecV1 {
		return conversation.Message{}, errCorrupt
	}
	d := &decoder{s: string(v), i: 2}
	var m conversation.Message
	m.IsError = v[1]&1 != 0
	at, n := binary.Varint(v[2:])
	if n <= 0 {
		return m, errCorrupt
	}
	d.i += n
	m.At = time.Unix(0, at)
	m.Role = agent.Role(d.field())
	m.Content = d.field()
	m.ToolCallID = d.field()
	m.TaskID = d.field()
	calls := d.uvarint()
	if d.err == nil && calls > uint64(len(d.s)-d.i) { // each takes 3 bytes at least
		return m, errCorrupt
	}
	if calls > 0 {
		m.ToolCalls = make([]agent.ToolCall, calls)
		for i := range m.ToolCalls {
			m.ToolCalls[i].ID = d.field()
			m.ToolCalls[i].Name = d.field()
			if args := d.field(); args != "" {
				m.ToolCalls[i].Arguments = json.RawMessage(args)
			}
		}
	}
	if d.err == nil && d.i != len(d.s) {
		d.err = errCorrupt
	}
	return m, d.err
}
