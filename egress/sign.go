package egress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
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

// signer computes both signatures of a webhook's requests.
type signer struct{ key []byte }

// bodySignature is the X-Axocoatl-Signature value.
func (s signer) bodySignature(body []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write(body)
	var sum [sha256.Size]byte
	return "sha256=" + hex.EncodeToString(m.Sum(sum[:0]))
}

// standardSignature is the webhook-signature value for id, ts and body.
func (s signer) standardSignature(id, ts string, body []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	var sum [sha256.Size]byte
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(sum[:0]))
}

// stamp sets the headers of one attempt at time now. Static headers go
// first: the ones egress sets win (Validate refuses such names anyway).
func (h *hook) stamp(hdr http.Header, d *delivery, now time.Time) {
	for k, v := range h.cfg.Headers {
		hdr.Set(k, v.Reveal())
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	hdr.Set("Content-Type", "application/json")
	hdr.Set("User-Agent", userAgent)
	hdr.Set(HeaderEvent, d.eventType)
	hdr.Set(HeaderDelivery, d.id)
	hdr.Set(HeaderTimestamp, ts)
	if h.sign != nil {
		hdr.Set(HeaderSignature, h.sign.bodySignature(d.body))
		hdr.Set(HeaderWebhookID, d.id)
		hdr.Set(HeaderWebhookTimestamp, ts)
		hdr.Set(HeaderWebhookSignature, h.sign.standardSignature(d.id, ts, d.body))
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
	s := signer{key: key}
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
