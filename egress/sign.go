package egress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names of a delivery.
const (
	HeaderEvent     = "X-Axocoatl-Event"
	HeaderDelivery  = "X-Axocoatl-Delivery"
	HeaderTimestamp = "X-Axocoatl-Timestamp"
	// HeaderSignature is "sha256=<hex HMAC-SHA256(key, body)>", as GitHub's
	// X-Hub-Signature-256. It does not cover the timestamp: receivers that
	// want replay protection check the Standard Webhooks headers ([Verify]
	// does).
	HeaderSignature = "X-Axocoatl-Signature"
	// Standard Webhooks v1: the signature covers "id.timestamp.body".
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// Errors of [Verify]; check them with errors.Is.
var (
	// ErrNoSignature: the request lacks the Standard Webhooks headers.
	ErrNoSignature = errors.New("egress: request is not signed")
	// ErrBadSignature: no signature matches the body and the secret.
	ErrBadSignature = errors.New("egress: signature does not match")
	// ErrTimestamp: the signed timestamp is outside the tolerance (a
	// replayed or badly delayed request).
	ErrTimestamp = errors.New("egress: timestamp outside the tolerance")
)

// signingKey turns a configured secret into the HMAC key: the base64 after
// a "whsec_" prefix (Standard Webhooks), else the secret's bytes.
func signingKey(secret string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		k, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, errors.New(`a "whsec_" secret must be base64 after the prefix`)
		}
		return k, nil
	}
	return []byte(secret), nil
}

// signer computes both signatures of a webhook's requests. Its HMACs are
// pooled: a busy webhook signs twice per attempt.
type signer struct {
	key  []byte
	macs sync.Pool
}

func newSigner(key []byte) *signer {
	s := &signer{key: key}
	s.macs.New = func() any { return hmac.New(sha256.New, key) }
	return s
}

func (s *signer) mac() hash.Hash {
	if s.macs.New == nil { // a signer built without newSigner
		return hmac.New(sha256.New, s.key)
	}
	m := s.macs.Get().(hash.Hash)
	m.Reset()
	return m
}

// bodySignature is the X-Axocoatl-Signature value.
func (s *signer) bodySignature(body []byte) string {
	m := s.mac()
	m.Write(body)
	var sum [sha256.Size]byte
	var out [len("sha256=") + 2*sha256.Size]byte
	copy(out[:], "sha256=")
	hex.Encode(out[len("sha256="):], m.Sum(sum[:0]))
	s.macs.Put(m)
	return string(out[:])
}

// standardSignature is the webhook-signature value for id, ts and body.
func (s *signer) standardSignature(id, ts string, body []byte) string {
	m := s.mac()
	var buf [128]byte
	m.Write(append(append(append(append(buf[:0], id...), '.'), ts...), '.'))
	m.Write(body)
	var sum [sha256.Size]byte
	var out [3 + 44]byte // "v1," + base64 of 32 bytes
	copy(out[:], "v1,")
	base64.StdEncoding.Encode(out[3:], m.Sum(sum[:0]))
	s.macs.Put(m)
	return string(out[:])
}

// Canonical header keys egress sets, so that stamping needs no
// canonicalization.
var (
	keyContentType = http.CanonicalHeaderKey("Content-Type")
	keyUserAgent   = http.CanonicalHeaderKey("User-Agent")
)

// stamp sets the headers of one attempt at time now. Static headers go
// first: the ones egress sets win (Validate refuses such names anyway).
// All values share one backing array (one allocation, not eleven).
func (h *hook) stamp(hdr http.Header, d *delivery, now time.Time) {
	for k, v := range h.cfg.Headers {
		hdr.Set(k, v.Reveal())
	}
	for k, v := range d.header { // a push delivery's: canonical names
		hdr[k] = []string{v}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	n := 5
	if h.sign != nil {
		n = 9
	}
	vals := make([]string, 0, n)
	set := func(k, v string) {
		vals = append(vals, v)
		hdr[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set(keyContentType, "application/json")
	set(keyUserAgent, userAgent)
	set(HeaderEvent, d.eventType)
	set(HeaderDelivery, d.id)
	set(HeaderTimestamp, ts)
	if h.sign != nil {
		set(HeaderSignature, h.sign.bodySignature(d.body))
		set(HeaderWebhookID, d.id)
		set(HeaderWebhookTimestamp, ts)
		set(HeaderWebhookSignature, h.sign.standardSignature(d.id, ts, d.body))
	}
}

// Verify checks a delivery the way a receiver should, over the exact bytes
// received: the Standard Webhooks signature (webhook-id, webhook-timestamp,
// webhook-signature; any of several space-separated "v1,…" signatures may
// match, as during a key rotation) and that webhook-timestamp is within
// tolerance of now (0: [DefaultTolerance]). When X-Axocoatl-Signature is
// present it must match too. secret is the webhook's secret as configured
// ("whsec_…" or plain). Errors wrap [ErrNoSignature], [ErrBadSignature] or
// [ErrTimestamp] and never contain the secret.
func Verify(secret string, header http.Header, body []byte, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	key, err := signingKey(secret)
	if err != nil {
		return fmt.Errorf("egress: verify: %v", err)
	}
	if len(key) == 0 {
		return errors.New("egress: verify: empty secret")
	}
	id, ts, sigs := header.Get(HeaderWebhookID), header.Get(HeaderWebhookTimestamp), header.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrNoSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not unix seconds", ErrTimestamp, ts)
	}
	if skew := time.Since(time.Unix(sec, 0)); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: %s off, tolerance %s", ErrTimestamp, skew.Round(time.Second), tolerance)
	}
	s := &signer{key: key}
	want := s.standardSignature(id, ts, body)
	ok := false
	for sig := range strings.FieldsSeq(sigs) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			ok = true
		}
	}
	if !ok {
		return ErrBadSignature
	}
	if got := header.Get(HeaderSignature); got != "" && !hmac.Equal([]byte(got), []byte(s.bodySignature(body))) {
		return fmt.Errorf("%w (%s)", ErrBadSignature, HeaderSignature)
	}
	return nil
}
