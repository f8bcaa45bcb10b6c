package lattice

import (
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"time"
)

// ids is the one piece of process-wide state in the library, on purpose: ids
// must be unique and time-ordered across every Engine, bus and module of the
// process, as with crypto/rand's reader. It holds no configuration.
//
// It produces UUIDv7 strings: 48 bits of unix milliseconds, then a 12-bit
// counter that keeps ids strictly increasing within one millisecond, then 62
// random bits. Sorting ids as strings sorts them by creation time.
var ids idSource

type idSource struct {
	mu     sync.Mutex
	lastMS int64
	seq    uint16
}

// NewID returns a new time-ordered unique id (UUIDv7 text form).
func NewID(now time.Time) string {
	ms := now.UnixMilli()
	ids.mu.Lock()
	if ms <= ids.lastMS {
		ms = ids.lastMS
		ids.seq++
		if ids.seq > 0xfff { // counter exhausted: borrow the next millisecond
			ms++
			ids.seq = 0
		}
	} else {
		ids.seq = 0
	}
	ids.lastMS = ms
	seq := ids.seq
	ids.mu.Unlock()

	var u [16]byte
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = 0x70 | byte(seq>>8)
	u[7] = byte(seq)
	r := rand.Uint64() // ChaCha8, seeded from the OS: unpredictable and fast
	for i := 8; i < 16; i++ {
		u[i] = byte(r >> (8 * (15 - i)))
	}
	u[8] = 0x80 | u[8]&0x3f

	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

// IDTime returns the creation time an id from [NewID] carries, to the
// millisecond: the instant an event was built (an [Event]'s Timestamp has
// only seconds). ok is false for a string that is not such an id (an event
// a host built with an id of its own).
func IDTime(id string) (t time.Time, ok bool) {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[14] != '7' || id[18] != '-' || id[23] != '-' {
		return time.Time{}, false
	}
	var b [6]byte
	if _, err := hex.Decode(b[0:4], []byte(id[0:8])); err != nil {
		return time.Time{}, false
	}
	if _, err := hex.Decode(b[4:6], []byte(id[9:13])); err != nil {
		return time.Time{}, false
	}
	ms := int64(b[0])<<40 | int64(b[1])<<32 | int64(b[2])<<24 | int64(b[3])<<16 | int64(b[4])<<8 | int64(b[5])
	return time.UnixMilli(ms), true
}
