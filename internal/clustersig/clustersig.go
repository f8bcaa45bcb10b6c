// Package clustersig signs and checks the NATS messages the daemons of a
// cluster act on: lattice events (package lattice/nats), cluster tasks,
// answers, cancels and announcements (package cluster) and queued webhook
// deliveries (package egress). One primitive, one place.
//
// A [Keyring] holds the cluster key (cluster.key) and the keys still
// accepted during a rotation (cluster.accepted_keys). [Keyring.Sign] puts
// the [Header] on a message: a version, the key's id (derived from the
// key: [KeyID]), the time of signing, a nonce (this Keyring's random
// instance and a counter) and a tag over the subject, the reply subject,
// the lattice headers (node, class, sequence), the payload and those
// fields. The tag is AES-256-GCM's (a GMAC: nothing is encrypted) under a
// subkey of the sender instance, HMAC-SHA256(key, instance), with the
// counter as the GCM nonce, so that no two messages under one subkey share
// a nonce; a receiver derives a sender's subkey once and keeps it (at most
// [MaxSenders] per key, only for senders whose messages passed).
// [Keyring.Check] refuses a message that carries none, one signed by a key
// not held, one whose tag does not match, one stamped outside [Window] of
// this process's clock, or one seen before (a [Guard] per receiving
// subscription: per sender instance, the highest counter and the
// [ReplayWindow] counters below it), and counts the refusal by [Reason];
// one log line per [LogEvery] says why.
//
// A nil *Keyring is the cluster without a key: Sign does nothing and Check
// accepts everything, as the daemons did before keys.
package clustersig

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axocoatl/axocoatl-go/secret"
)

// Header is the NATS header that carries a message's signature: its
// [SigLen] bytes, base64url-encoded (66 characters).
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
// from longest ago is forgotten, and [Window] alone guards against its
// replays. It bounds the subkeys a Keyring keeps per key too (beyond it one
// is forgotten, and derived again when its sender is heard from).
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

// The signature, as bytes (the [Header] carries them base64url-encoded,
// a sealed message's data ends with them and two bytes of their length):
// version (1 byte), key id (4), time of signing (unix ms, 8, big-endian),
// the signer's instance (12), its counter (8) and the tag (16).
const (
	sigVersion  = 2
	instanceLen = 12
	fieldsLen   = 1 + 4 + 8 + instanceLen + 8 // what the tag covers of the signature
	tagLen      = 16
	// SigLen is a signature's length in bytes.
	SigLen = fieldsLen + tagLen
	// SealOverhead is what [Keyring.Seal] appends to data: the signature
	// and its length. A sender that leaves this much spare capacity in
	// data spares Seal an allocation and a copy.
	SealOverhead = SigLen + 2
	// headerLen is the [Header]'s length: SigLen bytes base64url-encoded.
	headerLen = (SigLen*8 + 5) / 6
)

// macKey is one key: its id, and the AES-256-GCM instances of the sender
// instances whose messages passed under it (each sender MACs under a subkey
// of its own, so that its counter alone makes every GCM nonce unique).
type macKey struct {
	id  string
	raw [4]byte // id as bytes
	key []byte

	mu      sync.RWMutex
	senders map[[instanceLen]byte]cipher.AEAD
	// last is the sender heard from last, read without mu: a daemon
	// hears mostly from one or a few peers, and this spares the lock and
	// the map on the path of every task and answer.
	last atomic.Pointer[knownSender]
}

type knownSender struct {
	inst [instanceLen]byte
	aead cipher.AEAD
}

func newMACKey(key string) *macKey {
	k := &macKey{id: KeyID(key), key: []byte(key), senders: map[[instanceLen]byte]cipher.AEAD{}}
	_, _ = hex.Decode(k.raw[:], []byte(k.id))
	return k
}

// subkey is the AES-256-GCM of one sender instance under mk: its AES key
// is HMAC-SHA256(key, label, instance).
func (mk *macKey) subkey(inst [instanceLen]byte) cipher.AEAD {
	h := hmac.New(sha256.New, mk.key)
	h.Write([]byte("axocoatl/clustersig/v2 sender subkey\x00"))
	h.Write(inst[:])
	blk, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key: cannot fail
	}
	g, err := cipher.NewGCM(blk)
	if err != nil {
		panic(err)
	}
	return g
}

// sender is the AEAD of a sender instance that passed before, or a new
// one (remembered by remember once a message of it passes).
func (mk *macKey) sender(inst [instanceLen]byte) (g cipher.AEAD, known bool) {
	if l := mk.last.Load(); l != nil && l.inst == inst {
		return l.aead, true
	}
	mk.mu.RLock()
	g = mk.senders[inst]
	mk.mu.RUnlock()
	if g != nil {
		mk.last.Store(&knownSender{inst, g})
		return g, true
	}
	return mk.subkey(inst), false
}

func (mk *macKey) remember(inst [instanceLen]byte, g cipher.AEAD) {
	mk.mu.Lock()
	if len(mk.senders) >= MaxSenders {
		for i := range mk.senders { // any one: it is derived again when heard from
			delete(mk.senders, i)
			break
		}
	}
	mk.senders[inst] = g
	mk.mu.Unlock()
	mk.last.Store(&knownSender{inst, g})
}

// Keyring signs with one key and checks with it and the accepted ones. It
// is safe for concurrent use; nil is "no key" (see the package doc).
type Keyring struct {
	sign     *macKey
	byID     map[[4]byte]*macKey
	instance [instanceLen]byte // this Keyring's nonces: instance and counter
	own      cipher.AEAD       // its subkey under sign
	ctr      atomic.Uint64
	log      atomic.Pointer[slog.Logger] // nil: no log lines
	scratch  sync.Pool                   // *scratch

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
	k := &Keyring{sign: newMACKey(key.Reveal()), byID: map[[4]byte]*macKey{}, now: time.Now}
	if _, err := rand.Read(k.instance[:]); err != nil {
		return nil, err
	}
	k.own = k.sign.subkey(k.instance)
	k.scratch.New = func() any { return &scratch{aad: make([]byte, 0, 1024)} }
	if log != nil {
		k.log.Store(log)
	}
	k.byID[k.sign.raw] = k.sign
	for _, a := range accepted {
		m := newMACKey(a.Reveal())
		k.byID[m.raw] = m
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
	for _, m := range k.byID {
		if m.id != k.sign.id {
			out = append(out, m.id)
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

// Covered are the values of the headers a signature covers, in the order
// of the covered names (a missing header is ""); [HeaderValues] reads
// them off a message.
type Covered [len(covered)]string

// HeaderValues is the Covered of h.
func HeaderValues(h natsgo.Header) (c Covered) {
	if len(h) == 0 {
		return c
	}
	for i, name := range covered {
		if vs := h[name]; len(vs) > 0 {
			c[i] = vs[0]
		}
	}
	return c
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
	m.Header[Header] = []string{k.headerValue(m.Subject, m.Reply, HeaderValues(m.Header), m.Data, t)}
}

// SignHeader is the value of the [Header] for a message of subject, with
// no reply, whose covered headers are c: what [Keyring.Sign] sets, for a
// sender that knows its headers' values (the lattice). "" for nil.
func (k *Keyring) SignHeader(subject string, c *Covered, data []byte) string {
	if k == nil {
		return ""
	}
	return k.headerValue(subject, "", *c, data, k.now())
}

func (k *Keyring) headerValue(subject, reply string, c Covered, data []byte, t time.Time) string {
	sc := k.getScratch()
	k.sigAt(sc, sc.sig[:0], subject, reply, &c, data, t)
	b64.Encode(sc.text[:], sc.sig[:])
	v := string(sc.text[:])
	k.putScratch(sc)
	return v
}

// scratch is what signing or checking one message needs beside the
// message: kept in a pool, nothing is allocated per message.
type scratch struct {
	aad   []byte // what the tag covers
	nonce [12]byte
	sig   [SigLen]byte
	text  [headerLen]byte
}

func (k *Keyring) getScratch() *scratch { return k.scratch.Get().(*scratch) }

func (k *Keyring) putScratch(sc *scratch) {
	if cap(sc.aad) <= 1<<16 { // one huge message keeps no huge buffer
		k.scratch.Put(sc)
	}
}

// Seal returns data with its signature after it, for a message that
// carries no headers (NATS parses a message's headers at some cost: the
// cluster's tasks and answers have none): data, the signature, and the
// signature's length as two bytes, big-endian. The tag covers subject,
// reply and data. data[:len(data)] is not modified, but Seal appends in its
// spare capacity when there are [SealOverhead] bytes of it: the caller
// gives data up.
func (k *Keyring) Seal(subject, reply string, data []byte) []byte {
	if k == nil {
		return data
	}
	out := data
	if cap(data)-len(data) < SealOverhead {
		out = make([]byte, len(data), len(data)+SealOverhead)
		copy(out, data)
	}
	sc := k.getScratch()
	out = k.sigAt(sc, out, subject, reply, &Covered{}, out, k.now())
	k.putScratch(sc)
	return append(out, 0, SigLen)
}

// Open checks a message sealed by [Keyring.Seal] as Check does, and cuts
// the signature off m.Data when it passes.
func (k *Keyring) Open(m *natsgo.Msg, g *Guard, what string) bool {
	if k == nil {
		return true
	}
	var sig []byte
	data := m.Data
	if n := len(m.Data); n >= 2 {
		if l := int(m.Data[n-2])<<8 | int(m.Data[n-1]); l <= n-2 && l <= Overhead {
			sig, data = m.Data[n-2-l:n-2], m.Data[:n-2-l]
		}
	}
	sc := k.getScratch()
	r, detail := k.check(sc, sig, m.Subject, m.Reply, &Covered{}, data, g)
	k.putScratch(sc)
	if r < 0 {
		m.Data = data
		return true
	}
	k.refuse(r, what, m.Subject, "", detail)
	return false
}

// sigAt appends to b the signature of a message at t. data may be b
// itself (Seal): it is read before b is written beyond len(data).
func (k *Keyring) sigAt(sc *scratch, b []byte, subject, reply string, c *Covered, data []byte, t time.Time) []byte {
	var f [fieldsLen]byte
	f[0] = sigVersion
	copy(f[1:5], k.sign.raw[:])
	binary.BigEndian.PutUint64(f[5:13], uint64(t.UnixMilli()))
	copy(f[13:13+instanceLen], k.instance[:])
	ctr := k.ctr.Add(1)
	binary.BigEndian.PutUint64(f[13+instanceLen:], ctr)
	sc.aad = appendInput(sc.aad[:0], subject, reply, f[:], c, data)
	binary.BigEndian.PutUint64(sc.nonce[4:], ctr)
	b = append(b, f[:]...)
	return k.own.Seal(b, sc.nonce[:], nil, sc.aad)
}

// appendInput appends what the tag covers: every part length-prefixed,
// after a label.
func appendInput(b []byte, subject, reply string, fields []byte, c *Covered, data []byte) []byte {
	b = append(b, "axocoatl/clustersig/v2"...)
	b = binary.AppendUvarint(b, uint64(len(subject)))
	b = append(b, subject...)
	b = binary.AppendUvarint(b, uint64(len(reply)))
	b = append(b, reply...)
	b = binary.AppendUvarint(b, uint64(len(fields)))
	b = append(b, fields...)
	for _, v := range c {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

// parsed is a signature read.
type parsed struct {
	keyID    [4]byte
	at       time.Time
	instance [instanceLen]byte
	counter  uint64
	fields   []byte // what the tag covers of the signature
	tag      []byte
}

// parse reads a signature's bytes.
func parse(v []byte) (parsed, bool) {
	var p parsed
	if len(v) != SigLen || v[0] != sigVersion {
		return p, false
	}
	copy(p.keyID[:], v[1:5])
	p.at = time.UnixMilli(int64(binary.BigEndian.Uint64(v[5:13])))
	copy(p.instance[:], v[13:13+instanceLen])
	p.counter = binary.BigEndian.Uint64(v[13+instanceLen : fieldsLen])
	p.fields, p.tag = v[:fieldsLen], v[fieldsLen:]
	return p, p.counter != 0
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
	c := HeaderValues(m.Header)
	sc := k.getScratch()
	r, detail := k.check(sc, sc.decode(m.Header.Get(Header)), m.Subject, m.Reply, &c, m.Data, g)
	k.putScratch(sc)
	if r < 0 {
		return true
	}
	k.refuse(r, what, m.Subject, c[0], detail)
	return false
}

// CheckStored is Check for a message as a JetStream consumer gets it, kept
// and redelivered by the server: the MAC only, neither window nor replay.
func (k *Keyring) CheckStored(subject string, h natsgo.Header, data []byte, what string) bool {
	if k == nil {
		return true
	}
	c := HeaderValues(h)
	sc := k.getScratch()
	r, detail := k.check(sc, sc.decode(h.Get(Header)), subject, "", &c, data, nil)
	k.putScratch(sc)
	if r < 0 {
		return true
	}
	k.refuse(r, what, subject, c[0], detail)
	return false
}

// b64 is the [Header]'s encoding; strict: one signature has one spelling.
var b64 = base64.RawURLEncoding.Strict()

// decode is the signature bytes of a [Header] value (in sc.sig): none
// when it is empty, a non-signature when it does not decode.
func (sc *scratch) decode(v string) []byte {
	if v == "" {
		return nil
	}
	bad := sc.sig[:1]
	bad[0] = 0
	if len(v) != headerLen {
		return bad
	}
	n := copy(sc.text[:], v)
	if n, err := b64.Decode(sc.sig[:], sc.text[:n]); err != nil || n != SigLen {
		bad[0] = 0
		return bad
	}
	return sc.sig[:]
}

func (k *Keyring) check(sc *scratch, v []byte, subject, reply string, c *Covered, data []byte, g *Guard) (Reason, string) {
	if len(v) == 0 {
		return Unsigned, "it carries no signature: its sender has no cluster.key, or is no daemon"
	}
	p, ok := parse(v)
	if !ok {
		return Malformed, "its signature does not parse"
	}
	mk := k.byID[p.keyID]
	if mk == nil {
		return UnknownKey, fmt.Sprintf("it is signed with key id %x, which is neither cluster.key (id %s) nor one of cluster.accepted_keys: the sender holds another key", p.keyID, k.sign.id)
	}
	aead, known := k.own, true
	if mk != k.sign || p.instance != k.instance {
		aead, known = mk.sender(p.instance)
	}
	sc.aad = appendInput(sc.aad[:0], subject, reply, p.fields, c, data)
	binary.BigEndian.PutUint64(sc.nonce[4:], p.counter)
	if _, err := aead.Open(nil, sc.nonce[:], p.tag, sc.aad); err != nil {
		return BadMAC, "its signature does not match: forged, or altered on the way"
	}
	if !known {
		mk.remember(p.instance, aead)
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
	senders map[[instanceLen]byte]*window
	tick    uint64
	// last is the window of the sender that was taken from last (lastInst):
	// most messages come from the sender of the one before, and this
	// spares the map's lookup.
	lastInst [instanceLen]byte
	last     *window
}

type window struct {
	max  uint64
	bits [ReplayWindow / 64]uint64 // bit c%ReplayWindow: counter c taken (for c > max-ReplayWindow)
	used uint64                    // Guard.tick when last taken
}

// NewGuard returns an empty Guard.
func NewGuard() *Guard { return &Guard{senders: map[[instanceLen]byte]*window{}} }

func (g *Guard) take(instance [instanceLen]byte, c uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick++
	w := g.last
	if w == nil || g.lastInst != instance {
		if w = g.senders[instance]; w == nil {
			if len(g.senders) >= MaxSenders {
				g.evictLocked()
			}
			w = &window{}
			g.senders[instance] = w
		}
		g.lastInst, g.last = instance, w
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
	var oldest [instanceLen]byte
	at := uint64(0)
	first := true
	for id, w := range g.senders {
		if first || w.used < at {
			oldest, at, first = id, w.used, false
		}
	}
	delete(g.senders, oldest)
	if g.last != nil && g.lastInst == oldest {
		g.last = nil
	}
}
