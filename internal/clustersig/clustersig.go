// Package clustersig signs and checks the NATS messages the daemons of a
// cluster act on: lattice events (package lattice/nats), cluster tasks,
// answers, cancels and announcements (package cluster) and queued webhook
// deliveries (package egress). One primitive, one place.
//
// A [Keyring] holds the cluster key (cluster.key) and the keys still
// accepted during a rotation (cluster.accepted_keys). [Keyring.Sign] puts
// the [Header] on a message: a version, the key's id (derived from the
// key: [KeyID]), the time of signing, a nonce (this Keyring's random
// instance and a counter) and an HMAC-SHA256, cut to 128 bits, over the
// subject, the reply subject, the lattice headers (node, class, sequence),
// the payload and those fields. [Keyring.Check] refuses a message that
// carries none, one signed by a key not held, one whose MAC does not match,
// one stamped outside [Window] of this process's clock, or one seen before
// (a [Guard] per receiving subscription: per sender instance, the highest
// counter and the [ReplayWindow] counters below it), and counts the refusal
// by [Reason]; one log line per [LogEvery] says why.
//
// A nil *Keyring is the cluster without a key: Sign does nothing and Check
// accepts everything, as the daemons did before keys.
package clustersig

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axocoatl/axocoatl-go/secret"
)

// Header is the NATS header that carries a message's signature:
// "v1 <key id> <unix ms, base 36> <instance>.<counter, base 36> <MAC, base64url>".
const Header = "Axocoatl-Sig"

// Window is how far a message's time of signing may be from the receiver's
// clock, either way: older is a replay (or a clock behind), newer a clock
// ahead. The daemons' clocks must agree within it (NTP does).
const Window = 30 * time.Second

// ReplayWindow is how many counters below a sender's highest one a [Guard]
// remembers; a counter further below is refused as replayed.
const ReplayWindow = 1024

// MaxSenders bounds the sender instances one [Guard] follows (only senders
// whose messages passed the MAC: key holders); beyond it the one heard
// from longest ago is forgotten, and [Window] alone guards against its replays.
const MaxSenders = 4096

// MinKeyBytes is the shortest key taken; MaxAcceptedKeys the most accepted
// keys beside it.
const (
	MinKeyBytes     = 16
	MaxAcceptedKeys = 8
)

// Overhead is at most what the signature header adds to a message on the
// wire: the room the senders keep under NATS max_payload.
const Overhead = 128

// LogEvery bounds the log lines of refused messages: one per interval,
// with the count of those not logged.
const LogEvery = 10 * time.Second

// covered are the headers the MAC covers beside subject, reply and data:
// the lattice's node, class and sequence (lattice/nats's NodeHeader,
// ClassHeader, SeqHeader) and a queued webhook delivery's id, event id,
// event type and time (package egress).
var covered = [...]string{"Axocoatl-Node", "Axocoatl-Class", "Axocoatl-Seq",
	"Axocoatl-Delivery", "Axocoatl-Event-Id", "Axocoatl-Event-Type", "Axocoatl-Created"}

// Reason is why a message was refused.
type Reason int

const (
	// Unsigned: no signature (a sender without the key, or not a daemon).
	Unsigned Reason = iota
	// Malformed: a signature header that does not parse.
	Malformed
	// UnknownKey: signed with a key this daemon does not hold.
	UnknownKey
	// BadMAC: the MAC does not match: forged, or altered on the way.
	BadMAC
	// Stale: signed outside [Window] of this daemon's clock.
	Stale
	// Replayed: a message this subscription already took.
	Replayed
	numReasons
)

var reasonNames = [numReasons]string{"unsigned", "malformed", "unknown_key", "bad_mac", "stale", "replayed"}

// String is the reason's label on axocoatl_cluster_rejected_total.
func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// Reasons lists every reason, in label order.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// KeyID names a key without revealing it: the first 8 hex digits of a
// SHA-256 of it.
func KeyID(key string) string {
	h := sha256.Sum256([]byte("axocoatl cluster key id\x00" + key))
	return hex.EncodeToString(h[:4])
}

// ValidateKeys checks a key and its accepted keys: each at least
// [MinKeyBytes], at most [MaxAcceptedKeys] accepted ones, no two alike, and
// no accepted keys without a key. The error names neither key (their ids
// only).
func ValidateKeys(key secret.Secret, accepted []secret.Secret) (keyErr, acceptedErr error) {
	if key.IsZero() {
		if len(accepted) > 0 {
			return nil, errors.New("needs cluster.key: accepted keys are for checking beside the key a daemon signs with")
		}
		return nil, nil
	}
	if n := len(key.Reveal()); n < MinKeyBytes {
		keyErr = fmt.Errorf("is %d bytes, shorter than %d (make one with `openssl rand -base64 32`)", n, MinKeyBytes)
	}
	if len(accepted) > MaxAcceptedKeys {
		return keyErr, fmt.Errorf("has %d keys, more than %d", len(accepted), MaxAcceptedKeys)
	}
	seen := map[string]bool{KeyID(key.Reveal()): true}
	for i, k := range accepted {
		if n := len(k.Reveal()); n < MinKeyBytes {
			return keyErr, fmt.Errorf("[%d] is %d bytes, shorter than %d", i, n, MinKeyBytes)
		}
		id := KeyID(k.Reveal())
		if seen[id] {
			return keyErr, fmt.Errorf("[%d] (key id %s) is the key or another accepted key again", i, id)
		}
		seen[id] = true
	}
	return keyErr, nil
}

type macKey struct {
	id   string
	pool sync.Pool // *macState
}

// macState is one HMAC-SHA256 under a key, with its buffers (kept with
// it: nothing is allocated per message).
type macState struct {
	h   hash.Hash
	buf []byte
	sum []byte
}

func newMACKey(key string) *macKey {
	k := &macKey{id: KeyID(key)}
	raw := []byte(key)
	k.pool.New = func() any {
		return &macState{h: hmac.New(sha256.New, raw), buf: make([]byte, 0, 512), sum: make([]byte, 0, sha256.Size)}
	}
	return k
}

// Keyring signs with one key and checks with it and the accepted ones. It
// is safe for concurrent use; nil is "no key" (see the package doc).
type Keyring struct {
	sign     *macKey
	byID     map[string]*macKey
	instance string // this Keyring's nonces: instance + "." + counter
	ctr      atomic.Uint64
	log      atomic.Pointer[slog.Logger] // nil: no log lines

	rejected [numReasons]atomic.Uint64
	lastLog  atomic.Int64 // unix nanoseconds of the last refusal logged
	unlogged atomic.Uint64

	// now is the clock; tests move it.
	now func() time.Time
}

// New returns the Keyring of key and accepted, or nil (and no error) when
// key is zero. log receives the refusals (nil: none).
func New(key secret.Secret, accepted []secret.Secret, log *slog.Logger) (*Keyring, error) {
	if ke, ae := ValidateKeys(key, accepted); ke != nil || ae != nil {
		return nil, errors.Join(ke, ae)
	}
	if key.IsZero() {
		return nil, nil
	}
	var inst [9]byte
	if _, err := rand.Read(inst[:]); err != nil {
		return nil, err
	}
	k := &Keyring{sign: newMACKey(key.Reveal()), byID: map[string]*macKey{},
		instance: base64.RawURLEncoding.EncodeToString(inst[:]), now: time.Now}
	if log != nil {
		k.log.Store(log)
	}
	k.byID[k.sign.id] = k.sign
	for _, a := range accepted {
		m := newMACKey(a.Reveal())
		k.byID[m.id] = m
	}
	return k, nil
}

// KeyID is the id of the key this Keyring signs with ("" for nil).
func (k *Keyring) KeyID() string {
	if k == nil {
		return ""
	}
	return k.sign.id
}

// AcceptedIDs lists the ids of every key this Keyring checks with.
func (k *Keyring) AcceptedIDs() []string {
	if k == nil {
		return nil
	}
	out := []string{k.sign.id}
	for id := range k.byID {
		if id != k.sign.id {
			out = append(out, id)
		}
	}
	return out
}

// SetLogger gives a Keyring made without a logger one (safe while it is
// in use).
func (k *Keyring) SetLogger(log *slog.Logger) {
	if k != nil && log != nil {
		k.log.CompareAndSwap(nil, log)
	}
}

// Sign puts the signature header on m, for its subject, reply, lattice
// headers and data as they are now: set them first.
func (k *Keyring) Sign(m *natsgo.Msg) {
	if k == nil {
		return
	}
	k.SignAt(m, k.now())
}

// SignAt signs m as at t (for tests of the window).
func (k *Keyring) SignAt(m *natsgo.Msg, t time.Time) {
	if k == nil {
		return
	}
	if m.Header == nil {
		m.Header = natsgo.Header{}
	}
	m.Header[Header] = []string{string(k.appendSig(make([]byte, 0, 96), m.Subject, m.Reply, m.Header, m.Data, t))}
}

// Seal returns data with its signature after it, for a message that
// carries no headers (NATS parses a message's headers at some cost: the
// cluster's tasks and answers have none): data, the signature as in the
// [Header], and the signature's length as two bytes, big-endian. The
// MAC covers subject, reply and data; data is not modified.
func (k *Keyring) Seal(subject, reply string, data []byte) []byte {
	if k == nil {
		return data
	}
	out := make([]byte, len(data), len(data)+Overhead)
	copy(out, data)
	n := len(out)
	out = k.appendSig(out, subject, reply, nil, data, k.now())
	l := len(out) - n
	return append(out, byte(l>>8), byte(l))
}

// Open checks a message sealed by [Keyring.Seal] as Check does, and cuts
// the signature off m.Data when it passes.
func (k *Keyring) Open(m *natsgo.Msg, g *Guard, what string) bool {
	if k == nil {
		return true
	}
	sig, data := "", m.Data
	if n := len(m.Data); n >= 2 {
		if l := int(m.Data[n-2])<<8 | int(m.Data[n-1]); l <= n-2 && l <= Overhead {
			sig, data = string(m.Data[n-2-l:n-2]), m.Data[:n-2-l]
		}
	}
	r, detail := k.check(sig, m.Subject, m.Reply, nil, data, g)
	if r < 0 {
		m.Data = data
		return true
	}
	k.refuse(r, what, m.Subject, "", detail)
	return false
}

// appendSig appends the signature of a message at t to b.
func (k *Keyring) appendSig(b []byte, subject, reply string, h natsgo.Header, data []byte, t time.Time) []byte {
	start := len(b)
	b = append(b, "v1 "...)
	b = append(b, k.sign.id...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, t.UnixMilli(), 36)
	b = append(b, ' ')
	b = append(b, k.instance...)
	b = append(b, '.')
	b = strconv.AppendUint(b, k.ctr.Add(1), 36)
	mac := k.sign.mac(subject, reply, h, string(b[start:]), data)
	b = append(b, ' ')
	return base64.RawURLEncoding.AppendEncode(b, mac[:])
}

// mac computes the MAC of a message whose signature fields are fields:
// its first 16 bytes.
func (mk *macKey) mac(subject, reply string, h natsgo.Header, fields string, data []byte) (out [16]byte) {
	st := mk.pool.Get().(*macState)
	st.h.Reset()
	b := append(st.buf[:0], "axocoatl/clustersig/v1"...)
	b = binary.AppendUvarint(b, uint64(len(subject)))
	b = append(b, subject...)
	b = binary.AppendUvarint(b, uint64(len(reply)))
	b = append(b, reply...)
	b = binary.AppendUvarint(b, uint64(len(fields)))
	b = append(b, fields...)
	for _, name := range covered {
		v := ""
		if vs := h[name]; len(vs) > 0 {
			v = vs[0]
		}
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	b = binary.AppendUvarint(b, uint64(len(data)))
	b = append(b, data...)
	st.h.Write(b)
	st.sum = st.h.Sum(st.sum[:0])
	copy(out[:], st.sum)
	if cap(b) <= 4096 {
		st.buf = b[:0]
	}
	mk.pool.Put(st)
	return out
}

// parsed is a signature read.
type parsed struct {
	keyID    string
	at       time.Time
	instance string
	counter  uint64
	fields   string // what the MAC covers of the signature
	mac      [16]byte
}

// parse reads "v1 <key id> <ms> <instance>.<counter> <mac>".
func parse(v string) (parsed, bool) {
	var p parsed
	if len(v) > Overhead || !strings.HasPrefix(v, "v1 ") {
		return p, false
	}
	cut := strings.LastIndexByte(v, ' ')
	if cut < 3 {
		return p, false
	}
	p.fields = v[:cut]
	rest := v[3:cut]
	var f [3]string
	for i := range f {
		j := strings.IndexByte(rest, ' ')
		if i == 2 {
			j = len(rest)
		}
		if j <= 0 {
			return p, false
		}
		f[i], rest = rest[:j], rest[min(j+1, len(rest)):]
	}
	if strings.IndexByte(f[2], ' ') >= 0 {
		return p, false
	}
	ms, err := strconv.ParseInt(f[1], 36, 64)
	if err != nil {
		return p, false
	}
	inst, ctr, ok := strings.Cut(f[2], ".")
	if !ok || inst == "" {
		return p, false
	}
	if p.counter, err = strconv.ParseUint(ctr, 36, 64); err != nil || p.counter == 0 {
		return p, false
	}
	mac := v[cut+1:]
	if base64.RawURLEncoding.DecodedLen(len(mac)) != len(p.mac) {
		return p, false
	}
	if n, err := base64.RawURLEncoding.Decode(p.mac[:], []byte(mac)); err != nil || n != len(p.mac) {
		return p, false
	}
	p.keyID, p.at, p.instance = f[0], time.UnixMilli(ms), inst
	return p, true
}

// Check reports whether m is signed by a key this Keyring holds, within
// [Window], and new to g (nil g: no replay check, for a message a store
// keeps and may hand out again: the window is not checked either). A
// refusal is counted and, at most once per [LogEvery], logged with what:
// the kind of message ("task", "announcement", "lattice event").
func (k *Keyring) Check(m *natsgo.Msg, g *Guard, what string) bool {
	if k == nil {
		return true
	}
	r, detail := k.check(m.Header.Get(Header), m.Subject, m.Reply, m.Header, m.Data, g)
	if r < 0 {
		return true
	}
	k.refuse(r, what, m.Subject, m.Header.Get(covered[0]), detail)
	return false
}

// CheckStored is Check for a message as a JetStream consumer gets it, kept
// and redelivered by the server: the MAC only, neither window nor replay.
func (k *Keyring) CheckStored(subject string, h natsgo.Header, data []byte, what string) bool {
	if k == nil {
		return true
	}
	r, detail := k.check(h.Get(Header), subject, "", h, data, nil)
	if r < 0 {
		return true
	}
	k.refuse(r, what, subject, h.Get(covered[0]), detail)
	return false
}

func (k *Keyring) check(v, subject, reply string, h natsgo.Header, data []byte, g *Guard) (Reason, string) {
	if v == "" {
		return Unsigned, "it carries no signature: its sender has no cluster.key, or is no daemon"
	}
	p, ok := parse(v)
	if !ok {
		return Malformed, "its signature header does not parse"
	}
	mk := k.byID[p.keyID]
	if mk == nil {
		return UnknownKey, fmt.Sprintf("it is signed with key id %s, which is neither cluster.key (id %s) nor one of cluster.accepted_keys: the sender holds another key", p.keyID, k.sign.id)
	}
	want := mk.mac(subject, reply, h, p.fields, data)
	if !hmac.Equal(want[:], p.mac[:]) {
		return BadMAC, "its signature does not match: forged, or altered on the way"
	}
	if g == nil {
		return -1, ""
	}
	if d := k.now().Sub(p.at); d > Window || d < -Window {
		return Stale, fmt.Sprintf("it was signed %s from this daemon's clock, outside the %s window: a replay, or the clocks disagree", d.Round(time.Millisecond), Window)
	}
	if !g.take(p.instance, p.counter) {
		return Replayed, "it was taken before: a replay"
	}
	return -1, ""
}

func (k *Keyring) refuse(r Reason, what, subject, node, detail string) {
	k.rejected[r].Add(1)
	log := k.log.Load()
	if log == nil {
		return
	}
	now := k.now().UnixNano()
	last := k.lastLog.Load()
	if last != 0 && now-last < int64(LogEvery) || !k.lastLog.CompareAndSwap(last, now) {
		k.unlogged.Add(1)
		return
	}
	args := []any{"reason", r.String(), "subject", subject, "why", detail, "not_logged_since", k.unlogged.Swap(0)}
	if node != "" {
		args = append(args, "claims_node", node)
	}
	log.Warn("cluster message refused: "+what, args...)
}

// Rejected is how many messages were refused for r.
func (k *Keyring) Rejected(r Reason) uint64 {
	if k == nil || r < 0 || r >= numReasons {
		return 0
	}
	return k.rejected[r].Load()
}

var rejectedDesc = prometheus.NewDesc("axocoatl_cluster_rejected_total",
	"NATS messages of the cluster refused (events, tasks, answers, cancels, announcements, queued deliveries), by reason: unsigned, malformed, unknown_key, bad_mac, stale, replayed.",
	[]string{"reason"}, nil)

type collector struct{ k *Keyring }

// Collector is axocoatl_cluster_rejected_total of k (zeros for nil).
func Collector(k *Keyring) prometheus.Collector { return collector{k} }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- rejectedDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range Reasons() {
		ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(c.k.Rejected(r)), r.String())
	}
}

// Guard remembers the nonces one receiver took, so that a message replayed
// within [Window] is refused. Only messages whose MAC passed reach it, so
// only key holders' traffic fills it. Safe for concurrent use.
type Guard struct {
	mu      sync.Mutex
	senders map[string]*window
	tick    uint64
}

type window struct {
	max  uint64
	bits [ReplayWindow / 64]uint64 // bit c%ReplayWindow: counter c taken (for c > max-ReplayWindow)
	used uint64                    // Guard.tick when last taken
}

// NewGuard returns an empty Guard.
func NewGuard() *Guard { return &Guard{senders: map[string]*window{}} }

func (g *Guard) take(instance string, c uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick++
	w := g.senders[instance]
	if w == nil {
		if len(g.senders) >= MaxSenders {
			g.evictLocked()
		}
		w = &window{}
		g.senders[instance] = w
	}
	w.used = g.tick
	switch {
	case c > w.max:
		if c-w.max >= ReplayWindow {
			w.bits = [ReplayWindow / 64]uint64{}
		} else {
			for x := w.max + 1; x < c; x++ {
				w.clear(x)
			}
		}
		w.max = c
	case w.max-c >= ReplayWindow:
		return false // below what is remembered
	case w.has(c):
		return false
	}
	w.set(c)
	return true
}

func (w *window) has(c uint64) bool { i := c % ReplayWindow; return w.bits[i/64]&(1<<(i%64)) != 0 }
func (w *window) set(c uint64)      { i := c % ReplayWindow; w.bits[i/64] |= 1 << (i % 64) }
func (w *window) clear(c uint64)    { i := c % ReplayWindow; w.bits[i/64] &^= 1 << (i % 64) }

func (g *Guard) evictLocked() {
	var oldest string
	var at uint64
	for id, w := range g.senders {
		if oldest == "" || w.used < at {
			oldest, at = id, w.used
		}
	}
	delete(g.senders, oldest)
}
