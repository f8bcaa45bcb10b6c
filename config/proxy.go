package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// envProxy is the proxy choice of golang.org/x/net/http/httpproxy (the
// rules http.ProxyFromEnvironment applies) for HTTP_PROXY, HTTPS_PROXY and
// NO_PROXY values given, not read from the process: doctor checks the
// environment the config was read with.
//
// It is a port rather than an import because httpproxy brings its own copy
// of the IDNA and Unicode normalisation tables (golang.org/x/net/idna,
// golang.org/x/text), 250 KB of the daemon's binary for one doctor check
// (bench/README.md). The one difference: a host that is not ASCII is
// compared as written, where httpproxy compares its punycode form.
// TestEnvProxyAsHTTPProxy checks the two choose alike.
type envProxy struct {
	http, https *url.URL
	all         bool // NO_PROXY=*
	nets        []*net.IPNet
	ips         []noProxyIP
	domains     []noProxyDomain
}

type noProxyIP struct {
	ip   net.IP
	port string
}

// noProxyDomain matches host and its subdomains ("example.com"), or its
// subdomains only (".example.com", "*.example.com"); host begins with ".".
type noProxyDomain struct {
	host, port string
	exact      bool
}

func newEnvProxy(httpProxy, httpsProxy, noProxy string) *envProxy {
	p := &envProxy{}
	p.http, _ = parseProxyURL(httpProxy)
	p.https, _ = parseProxyURL(httpsProxy)
	for _, e := range strings.Split(noProxy, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case e == "*":
			p.all = true
			return p
		}
		if _, n, err := net.ParseCIDR(e); err == nil {
			p.nets = append(p.nets, n)
			continue
		}
		host, port, err := net.SplitHostPort(e)
		if err == nil {
			if host == "" {
				continue // malformed: no host
			}
			host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		} else {
			host = e
		}
		if ip := net.ParseIP(host); ip != nil {
			p.ips = append(p.ips, noProxyIP{ip, port})
			continue
		}
		if host == "" {
			continue
		}
		if strings.HasPrefix(host, "*.") {
			host = host[1:]
		}
		exact := false
		if host[0] != '.' {
			exact, host = true, "."+host
		}
		p.domains = append(p.domains, noProxyDomain{host, port, exact})
	}
	return p
}

// parseProxyURL reads a proxy's address, "http://" assumed when it names
// no scheme or host.
func parseProxyURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		if u, err := url.Parse("http://" + s); err == nil {
			return u, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("invalid proxy address %q: %v", s, err)
	}
	return u, nil
}

// proxy is the proxy a request to u goes through; nil for none.
func (p *envProxy) proxy(u *url.URL) (*url.URL, error) {
	var via *url.URL
	switch u.Scheme {
	case "https":
		via = p.https
	case "http":
		via = p.http
	}
	if via == nil || !p.uses(u) {
		return nil, nil
	}
	return via, nil
}

// uses says whether NO_PROXY leaves u to the proxy: never for localhost or
// a loopback address.
func (p *envProxy) uses(u *url.URL) bool {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080"}[u.Scheme]
	}
	if host == "localhost" {
		return false
	}
	var ip net.IP
	if a, err := netip.ParseAddr(host); err == nil {
		ip = net.IP(a.AsSlice())
		if ip.IsLoopback() {
			return false
		}
	}
	if p.all {
		return false
	}
	host = strings.ToLower(strings.TrimSpace(host))
	if ip != nil {
		for _, n := range p.nets {
			if n.Contains(ip) {
				return false
			}
		}
		for _, m := range p.ips {
			if m.ip.Equal(ip) && (m.port == "" || m.port == port) {
				return false
			}
		}
		return true
	}
	for _, d := range p.domains {
		if (strings.HasSuffix(host, d.host) || (d.exact && host == d.host[1:])) && (d.port == "" || d.port == port) {
			return false
		}
	}
	return true
}
