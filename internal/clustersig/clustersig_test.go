package clustersig

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/axocoatl/axocoatl-go/secret"
)

const (
	k1 = secret.Secret("0123456789abcdef-key-one")
	k2 = secret.Secret("0123456789abcdef-key-two")
)

func ring(t *testing.T, key secret.Secret, accepted ...secret.Secret) *Keyring {
	t.Helper()
	k, err := New(key, accepted, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func msg() *natsgo.Msg {
	return &natsgo.Msg{Subject: "axocoatl.Verdict", Reply: "_INBOX.x", Data: []byte(`{"approval_id":"a1"}`),
		Header: natsgo.Header{"Axocoatl-Node": []string{"a"}, "Axocoatl-Seq": []string{"7"}}}
}

// alterSig flips a bit of byte i of m's signature.
func alterSig(m *natsgo.Msg, i int) {
	b, err := base64.RawURLEncoding.DecodeString(m.Header.Get(Header))
	if err != nil {
		panic(err)
	}
	b[i] ^= 1
	m.Header.Set(Header, base64.RawURLEncoding.EncodeToString(b))
}

func TestSignCheck(t *testing.T) {
	a, b := ring(t, k1), ring(t, k1)
	m := msg()
	a.Sign(m)
	g := NewGuard()
	if !b.Check(m, g, "test") {
		t.Fatal("a genuine message refused")
	}
	if b.Check(m, g, "test") || b.Rejected(Replayed) != 1 {
		t.Fatalf("a replay taken (replayed %d)", b.Rejected(Replayed))
	}
	if !b.Check(m, NewGuard(), "test") {
		t.Fatal("another subscription's guard refused it")
	}
	for name, change := range map[string]func(*natsgo.Msg){
		"data":     func(m *natsgo.Msg) { m.Data = bytes.Replace(m.Data, []byte("a1"), []byte("a2"), 1) },
		"subject":  func(m *natsgo.Msg) { m.Subject = "axocoatl.Resolved" },
		"reply":    func(m *natsgo.Msg) { m.Reply = "_INBOX.y" },
		"node":     func(m *natsgo.Msg) { m.Header.Set("Axocoatl-Node", "b") },
		"class":    func(m *natsgo.Msg) { m.Header.Set("Axocoatl-Class", "telemetry") },
		"seq":      func(m *natsgo.Msg) { m.Header.Set("Axocoatl-Seq", "8") },
		"time":     func(m *natsgo.Msg) { alterSig(m, 12) },
		"instance": func(m *natsgo.Msg) { alterSig(m, 13) },
		"counter":  func(m *natsgo.Msg) { alterSig(m, fieldsLen-1) },
		"tag":      func(m *natsgo.Msg) { alterSig(m, SigLen-1) },
	} {
		m := msg()
		a.Sign(m)
		change(m)
		before := b.Rejected(BadMAC)
		if b.Check(m, NewGuard(), "test") || b.Rejected(BadMAC) != before+1 {
			t.Errorf("%s changed: taken", name)
		}
	}
	if b.Check(msg(), g, "test") || b.Rejected(Unsigned) != 1 {
		t.Error("an unsigned message taken")
	}
	m = msg()
	m.Header.Set(Header, "v1 nonsense")
	if b.Check(m, g, "test") || b.Rejected(Malformed) != 1 {
		t.Error("a malformed signature taken")
	}
	// Another spelling of a genuine signature (the last character's
	// unused bits set) does not decode.
	m = msg()
	a.Sign(m)
	v := []byte(m.Header.Get(Header))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	v[len(v)-1] = alphabet[strings.IndexByte(alphabet, v[len(v)-1])|1]
	m.Header.Set(Header, string(v))
	if b.Check(m, g, "test") || b.Rejected(Malformed) != 2 {
		t.Error("a signature spelt otherwise taken")
	}
	other := ring(t, k2)
	m = msg()
	other.Sign(m)
	if b.Check(m, g, "test") || b.Rejected(UnknownKey) != 1 {
		t.Error("another key's message taken")
	}
	// Accepted keys: rotation.
	if !ring(t, k1, k2).Check(m, NewGuard(), "test") {
		t.Error("a message of an accepted key refused")
	}
	var nilRing *Keyring
	if !nilRing.Check(msg(), g, "test") {
		t.Error("no key refuses")
	}
}

// Guards: bound "a signed message's age" (30 s either way, Window;
// docs/bounds.md): outside it a genuine signature is refused as stale.
func TestWindow(t *testing.T) {
	a := ring(t, k1)
	for _, d := range []time.Duration{-Window - time.Second, Window + time.Second} {
		m := msg()
		a.SignAt(m, time.Now().Add(d))
		if a.Check(m, NewGuard(), "test") {
			t.Errorf("signed %s away: taken", d)
		}
	}
	if a.Rejected(Stale) != 2 {
		t.Errorf("stale %d", a.Rejected(Stale))
	}
	m := msg()
	a.SignAt(m, time.Now().Add(-Window+time.Second))
	if !a.Check(m, NewGuard(), "test") {
		t.Error("inside the window: refused")
	}
	// A stored message (JetStream) has no window.
	m = msg()
	m.Reply = ""
	a.SignAt(m, time.Now().Add(-time.Hour))
	if !a.CheckStored(m.Subject, m.Header, m.Data, "test") {
		t.Error("a stored message refused for its age")
	}
}

// Guards: bounds "replays remembered, per sender and subscription"
// (ReplayWindow, 1024) and "senders followed per subscription"
// (MaxSenders, 4096) of docs/bounds.md.
func TestGuardWindow(t *testing.T) {
	inst := func(s string) (i [instanceLen]byte) { copy(i[:], s); return i }
	g := NewGuard()
	for _, c := range []uint64{5, 3, 4, 2000, 1500, 977} {
		if !g.take(inst("i"), c) {
			t.Fatalf("counter %d refused", c)
		}
	}
	for _, c := range []uint64{5, 3, 2000, 1500, 976, 1} {
		if g.take(inst("i"), c) {
			t.Errorf("counter %d taken twice (or below the window)", c)
		}
	}
	// Two senders in turn (the window of the last one is kept at hand):
	// each one's counters are its own.
	for _, c := range []uint64{7, 8} {
		if !g.take(inst("j"), c) || !g.take(inst("i"), 3000+c) {
			t.Fatalf("counter %d refused", c)
		}
	}
	if g.take(inst("j"), 7) || g.take(inst("i"), 3007) || !g.take(inst("j"), 3007) || g.take(inst("j"), 8) {
		t.Error("two senders' counters mixed up")
	}
	for i := range MaxSenders + 10 {
		g.take(inst(string(rune(i+100))), 1)
	}
	if len(g.senders) > MaxSenders {
		t.Errorf("%d senders kept", len(g.senders))
	}
}

// Guards: bound "log lines of refused cluster messages" (one per 10 s,
// docs/bounds.md): a flood of forgeries writes one line.
func TestRefusalLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	k, err := New(k1, nil, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		k.Check(msg(), NewGuard(), "lattice event")
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for 100 refusals:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "reason=unsigned") || strings.Contains(buf.String(), k1.Reveal()) {
		t.Fatal(buf.String())
	}
}

// Guards: bound cluster.accepted_keys (8 keys, each 16 bytes at least;
// docs/bounds.md).
func TestValidateKeys(t *testing.T) {
	many := make([]secret.Secret, MaxAcceptedKeys+1)
	for i := range many {
		many[i] = secret.Secret(strings.Repeat(string(rune('a'+i)), MinKeyBytes))
	}
	if _, ae := ValidateKeys(k1, many); ae == nil {
		t.Error("more than MaxAcceptedKeys taken")
	}
	if _, ae := ValidateKeys(k1, many[:MaxAcceptedKeys]); ae != nil {
		t.Error(ae)
	}
	if ke, _ := ValidateKeys("short", nil); ke == nil {
		t.Error("a short key taken")
	}
	if _, ae := ValidateKeys(k1, []secret.Secret{k1}); ae == nil {
		t.Error("the key accepted again")
	}
	if _, ae := ValidateKeys("", []secret.Secret{k1}); ae == nil {
		t.Error("accepted keys without a key")
	}
	if ke, ae := ValidateKeys(k1, []secret.Secret{k2}); ke != nil || ae != nil {
		t.Error(ke, ae)
	}
	_, ae := ValidateKeys(k1, []secret.Secret{"x"})
	if ae == nil || strings.Contains(ae.Error(), "x\"") {
		t.Error(ae)
	}
}

func BenchmarkSignCheck(b *testing.B) {
	k, _ := New(k1, nil, nil)
	g := NewGuard()
	data := bytes.Repeat([]byte("x"), 300)
	for b.Loop() {
		m := &natsgo.Msg{Subject: "axocoatl-cluster.exec.echo", Reply: "_INBOX.abc.1", Data: data}
		k.Sign(m)
		if !k.Check(m, g, "task") {
			b.Fatal("refused")
		}
	}
}

func BenchmarkSealOpen(b *testing.B) {
	k, _ := New(k1, nil, nil)
	g := NewGuard()
	data := bytes.Repeat([]byte("x"), 100)
	for b.Loop() {
		sealed := k.Seal("axocoatl-cluster.exec.echo", "_INBOX.abc.1", data)
		m := &natsgo.Msg{Subject: "axocoatl-cluster.exec.echo", Reply: "_INBOX.abc.1", Data: sealed}
		if !k.Open(m, g, "task") {
			b.Fatal("refused")
		}
	}
}

func BenchmarkMACOnly(b *testing.B) {
	k, _ := New(k1, nil, nil)
	data := bytes.Repeat([]byte("x"), 100)
	var sig [SigLen]byte
	now := time.Now()
	sc := k.getScratch()
	for b.Loop() {
		k.sigAt(sc, sig[:0], "axocoatl-cluster.exec.echo", "_INBOX.abc.1", &Covered{}, data, now)
	}
}

// FuzzOpen: whatever the bytes, Open neither panics nor takes them.
func FuzzOpen(f *testing.F) {
	k, _ := New(k1, nil, nil)
	f.Add([]byte("v1 x"), "s")
	f.Add(k.Seal("s", "", []byte("hello")), "s")
	f.Add([]byte{'v', '1', ' ', ' ', ' ', ' ', 0, 5}, "s")
	f.Fuzz(func(t *testing.T, data []byte, subject string) {
		m := &natsgo.Msg{Subject: subject + "x", Data: data}
		if k.Open(m, NewGuard(), "fuzz") {
			t.Fatalf("taken: %q", data)
		}
		h := &natsgo.Msg{Subject: "s", Header: natsgo.Header{Header: []string{string(data)}}}
		if k.Check(h, NewGuard(), "fuzz") {
			t.Fatalf("taken as a header: %q", data)
		}
	})
}

// TestSubkeysBounded: a checker keeps at most MaxSenders senders' subkeys
// per key, only of senders whose messages passed, and still takes a
// sender it forgot.
func TestSubkeysBounded(t *testing.T) {
	b := ring(t, k1)
	first := ring(t, k1)
	m := msg()
	first.Sign(m)
	if !b.Check(m, NewGuard(), "test") {
		t.Fatal("refused")
	}
	// A new sender's message with a wrong tag: its subkey is derived,
	// but not kept.
	forged := msg()
	ring(t, k1).Sign(forged)
	alterSig(forged, SigLen-1)
	for range MaxSenders + 10 {
		a := ring(t, k1)
		m := msg()
		a.Sign(m)
		if !b.Check(m, NewGuard(), "test") {
			t.Fatal("refused")
		}
	}
	if n := len(b.sign.senders); n > MaxSenders {
		t.Errorf("%d subkeys kept", n)
	}
	m = msg()
	first.Sign(m)
	if !b.Check(m, NewGuard(), "test") {
		t.Error("a sender forgotten is refused")
	}
	if b.Check(forged, NewGuard(), "test") || b.Rejected(BadMAC) != 1 {
		t.Error("forged taken")
	}
	p, _ := parse(new(scratch).decode(forged.Header.Get(Header)))
	if _, kept := b.sign.senders[p.instance]; kept {
		t.Error("a forger's subkey kept")
	}
}
