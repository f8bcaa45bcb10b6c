package egress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// GitHub's published test vector for X-Hub-Signature-256, the model of
// X-Axocoatl-Signature.
func TestBodySignatureGitHubVector(t *testing.T) {
	key, _ := signingKey("It's a Secret to Everybody")
	got := newSigner(key).bodySignature([]byte("Hello, World!"))
	if want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// signed builds the headers a receiver gets, computed here with
// crypto/hmac, independently of the package's signer.
func signed(secret, id string, ts time.Time, body []byte) http.Header {
	key := []byte(secret)
	if k, ok := strings.CutPrefix(secret, "whsec_"); ok {
		key, _ = base64.StdEncoding.DecodeString(k)
	}
	s := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + s + "." + string(body)))
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", s)
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}

func TestVerify(t *testing.T) {
	body := []byte(`{"delivery_id":"d1","event_id":"e1","event_type":"TaskCompleted","produced_by":"x","timestamp":1,"payload":{}}`)
	now := time.Now()
	for _, secret := range []string{"plain-secret", "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))} {
		h := signed(secret, "d1", now, body)
		if err := Verify(secret, h, body, 0); err != nil {
			t.Fatalf("%s: a good request refused: %v", secret, err)
		}
		// With X-Axocoatl-Signature too, it must match.
		key, _ := signingKey(secret)
		h.Set(HeaderSignature, newSigner(key).bodySignature(body))
		if err := Verify(secret, h, body, 0); err != nil {
			t.Fatalf("with body signature: %v", err)
		}
		changed := append([]byte(nil), body...)
		changed[len(changed)-2] = ' '
		if err := Verify(secret, h, changed, 0); !errors.Is(err, ErrBadSignature) {
			t.Errorf("changed body: %v", err)
		}
		if err := Verify("wrong-secret", h, body, 0); !errors.Is(err, ErrBadSignature) {
			t.Errorf("wrong secret: %v", err)
		}
		old := signed(secret, "d1", now.Add(-6*time.Minute), body)
		if err := Verify(secret, old, body, 0); !errors.Is(err, ErrTimestamp) {
			t.Errorf("timestamp 6m old, default tolerance: %v", err)
		}
		if err := Verify(secret, old, body, 10*time.Minute); err != nil {
			t.Errorf("timestamp 6m old, tolerance 10m: %v", err)
		}
		future := signed(secret, "d1", now.Add(time.Hour), body)
		if err := Verify(secret, future, body, time.Minute); !errors.Is(err, ErrTimestamp) {
			t.Errorf("timestamp an hour ahead: %v", err)
		}
		// A replay under another id fails: the id is signed.
		replay := signed(secret, "d1", now, body)
		replay.Set("webhook-id", "d2")
		if err := Verify(secret, replay, body, 0); !errors.Is(err, ErrBadSignature) {
			t.Errorf("other id: %v", err)
		}
		// Key rotation: several signatures, one good.
		rot := signed(secret, "d1", now, body)
		rot.Set("webhook-signature", "v1,AAAA "+rot.Get("webhook-signature"))
		if err := Verify(secret, rot, body, 0); err != nil {
			t.Errorf("rotation list: %v", err)
		}
		// A good Standard signature with a wrong body signature fails.
		h.Set(HeaderSignature, "sha256=00")
		if err := Verify(secret, h, body, 0); !errors.Is(err, ErrBadSignature) {
			t.Errorf("bad X-Axocoatl-Signature: %v", err)
		}
	}
	if err := Verify("s", http.Header{}, body, 0); !errors.Is(err, ErrNoSignature) {
		t.Errorf("unsigned: %v", err)
	}
	if err := Verify("", signed("s", "d1", now, body), body, 0); err == nil {
		t.Error("empty secret accepted")
	}
	if err := Verify("s", signed("s", "d1", now, body), body, 0); err != nil || strings.Contains(Verify("topsecret", signed("s", "d1", now, body), body, 0).Error(), "topsecret") {
		t.Errorf("error mentions the secret or good request refused: %v", err)
	}
}

func TestBackoffAndRetryAfter(t *testing.T) {
	base, ceil := 10*time.Millisecond, 300*time.Millisecond
	prevMean := time.Duration(0)
	for attempt := range 8 {
		bound := min(ceil, base<<attempt)
		var sum time.Duration
		const n = 4000
		for range n {
			d := fullJitter(base, ceil, attempt)
			if d < 0 || d > bound {
				t.Fatalf("attempt %d: %s outside [0, %s]", attempt, d, bound)
			}
			sum += d
		}
		mean := sum / n
		// Full jitter: the mean is half the bound, which doubles until the cap.
		if mean < bound*4/10 || mean > bound*6/10 {
			t.Errorf("attempt %d: mean %s, want about %s", attempt, mean, bound/2)
		}
		if bound < ceil && mean < prevMean*15/10 {
			t.Errorf("attempt %d: mean %s did not grow from %s", attempt, mean, prevMean)
		}
		prevMean = mean
	}
	if d := fullJitter(time.Second, time.Minute, 1000); d > time.Minute {
		t.Errorf("huge attempt: %s", d)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"1":                             time.Second,
		"86400":                         24 * time.Hour,
		"Mon, 30 Nov 2026 12:00:05 GMT": 5 * time.Second,
		"Mon, 30 Nov 2026 11:00:00 GMT": 0,
	} {
		if got, ok := retryAfter(v, now); !ok || got != want {
			t.Errorf("Retry-After %q = %s %v, want %s", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "soon"} {
		if _, ok := retryAfter(v, now); ok {
			t.Errorf("Retry-After %q accepted", v)
		}
	}
	h := &hook{}
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"86400"}}}
	if got := h.backoff(base, ceil, 0, resp); got != ceil {
		t.Errorf("Retry-After 86400 gave %s, want the cap %s", got, ceil)
	}
}
