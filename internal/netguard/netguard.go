// Package netguard refuses the addresses a request whose URL a client
// chose must not reach (loopback, private, link-local, cloud metadata):
// the server-side request forgery guard of A2A push notifications. The
// check runs on the address actually dialed ([Control], a [net.Dialer]
// Control func), so a name that resolves to a public address when it is
// registered and to a private one when it is dialed (DNS rebinding) is
// refused too.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// ErrRefused marks an address the guard refuses; check with errors.Is.
var ErrRefused = errors.New("address refused")

// special are the ranges refused beside what netip classifies: "this
// network", carrier-grade NAT (Alibaba's metadata service is
// 100.100.100.200), IETF protocol assignments, benchmarking, reserved and
// broadcast; NAT64, 6to4 and the other IPv6 forms of IPv4 addresses.
var special = []struct {
	p    netip.Prefix
	what string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	// IPv4 in other IPv6 forms than the mapped one (Check unmaps that):
	// IPv4-compatible (deprecated; a 6in4 route sends it as IPv4) and
	// IPv4-translated. Teredo embeds an IPv4 address too.
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated IPv6 address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
}

// Check says why ip may not be dialed (an error wrapping [ErrRefused]),
// or nil for a public unicast address. IPv4 addresses written as IPv6
// (::ffff:127.0.0.1) are checked as IPv4.
func Check(ip netip.Addr) error {
	ip = ip.Unmap()
	what := ""
	switch {
	case !ip.IsValid():
		what = "not an address"
	case ip.IsLoopback():
		what = "a loopback address"
	case ip.IsLinkLocalUnicast():
		what = "a link-local address (cloud metadata services live there)"
	case ip.IsPrivate():
		what = "a private address"
	case ip.IsUnspecified():
		what = "the unspecified address"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		what = "a multicast address"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		what = "the broadcast address"
	default:
		for _, s := range special {
			if s.p.Contains(ip) {
				what = s.what
				break
			}
		}
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: %s is %s", ErrRefused, ip, what)
}

// Control is a [net.Dialer] Control func that refuses what [Check]
// refuses, on the address about to be connected to.
func Control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: dial address %q", ErrRefused, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: dial address %q is not an IP address", ErrRefused, address)
	}
	return Check(ip)
}

// CheckHost refuses, before any dial, a host that is an IP address Check
// refuses or a name that always means this machine ("localhost",
// "*.localhost"). Other names are left to [Control] when they are dialed.
func CheckHost(host string) error {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("%w: %s is this machine (a loopback name)", ErrRefused, host)
	}
	if i := strings.IndexByte(h, '%'); i >= 0 { // a zone: fe80::1%eth0
		h = h[:i]
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return Check(ip)
	}
	return nil
}

// Allowed reports whether host is one of hosts (compared without case,
// port or a trailing dot): such a host is not guarded.
func Allowed(host string, hosts []string) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	for _, a := range hosts {
		if strings.TrimSuffix(strings.ToLower(strings.Trim(a, "[]")), ".") == h {
			return true
		}
	}
	return false
}
