package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	refused := []string{"127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"fe80::1", "fd00:ec2::254", "0.0.0.0", "::", "100.100.100.200", "224.0.0.1", "255.255.255.255", "::ffff:127.0.0.1",
		"::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "0.1.2.3",
		// IPv4 written in the other IPv6 forms: IPv4-compatible (::a.b.c.d,
		// deprecated; a stack with a 6in4 route sends it as IPv4),
		// IPv4-translated (::ffff:0:a.b.c.d); and the site-local range
		// (deprecated, routed inside some networks still).
		"::127.0.0.1", "::169.254.169.254", "::ffff:0:127.0.0.1", "::ffff:0:a9fe:a9fe", "fec0::1", "feff::1",
		// Teredo embeds an IPv4 server; discard-only and ORCHIDs are never a receiver.
		"2001::1", "100::1"}
	for _, s := range refused {
		if err := Check(netip.MustParseAddr(s)); !errors.Is(err, ErrRefused) {
			t.Errorf("Check(%s) = %v, want refused", s, err)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "93.184.216.34"} {
		if err := Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("Check(%s) = %v, want nil", s, err)
		}
	}
	for _, h := range []string{"localhost", "LOCALHOST.", "api.localhost", "[::1]", "127.0.0.1", "fe80::1%eth0"} {
		if err := CheckHost(h); !errors.Is(err, ErrRefused) {
			t.Errorf("CheckHost(%s) = %v, want refused", h, err)
		}
	}
	if err := CheckHost("example.com"); err != nil {
		t.Errorf("CheckHost(example.com) = %v", err)
	}
	if !Allowed("Receiver.Internal.", []string{"receiver.internal"}) || Allowed("evil.internal", []string{"receiver.internal"}) {
		t.Error("Allowed compares names without case and trailing dot, and nothing else")
	}
}

// A dialer with Control refuses a loopback listener, whatever name led
// to it: the check is on the address dialed.
func TestControlRefusesTheDialedAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Timeout: 10 * time.Second, Control: Control}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", port)} {
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s: connected, want refused", addr)
		}
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("dial %s: %v, want ErrRefused", addr, err)
		}
	}
}
