package config

import (
	"fmt"
	"net/url"
	"testing"

	"golang.org/x/net/http/httpproxy"
)

// envProxy chooses as golang.org/x/net/http/httpproxy does, for every
// pairing of the environments and URLs below (ASCII hosts: the one
// difference is documented on envProxy).
func TestEnvProxyAsHTTPProxy(t *testing.T) {
	envs := [][3]string{ // HTTP_PROXY, HTTPS_PROXY, NO_PROXY
		{"", "", ""},
		{"http://proxy:3128", "", ""},
		{"", "https://user:pw@secure-proxy:8443", ""},
		{"proxy:3128", "proxy.internal", ""}, // no scheme: http:// assumed
		{"socks5://s:1080", "://bad", ""},    // unparsable: http:// tried
		{"http://p:1", "http://p:2", "*"},    // nothing proxied
		{"http://p:1", "http://p:2", "example.com, .internal,10.0.0.0/8"},
		{"http://p:1", "http://p:2", "*.corp.example:8443,192.168.1.7,[::2]:443, [2001:db8::]/32"},
		{"http://p:1", "http://p:2", "FOO.example,  ,bar.example:80,:80,*foo.org,10.1.2.3:8080"},
		{"http://p:1", "http://p:2", "sub.example.com"},
	}
	urls := []string{
		"http://example.com/h", "https://example.com/h", "https://www.example.com/h", "https://notexample.com/",
		"https://a.internal/", "https://internal/", "http://10.2.3.4/", "https://10.2.3.4:8443/", "https://11.0.0.1/",
		"https://x.corp.example:8443/", "https://x.corp.example/", "https://corp.example:8443/",
		"https://192.168.1.7/", "https://192.168.1.8/", "https://[::2]/", "https://[::2]:444/", "https://[2001:db8::1]/",
		"https://foo.example/", "https://FOO.EXAMPLE/", "http://bar.example/", "https://bar.example/",
		"https://10.1.2.3:8080/", "https://10.1.2.3/", "https://xfoo.org/", "https://foo.org/",
		"http://localhost:8080/", "https://LOCALHOST/", "http://127.0.0.1/", "https://[::1]:9/", "https://[fe80::1%25eth0]/",
		"https://example.com.evil.test/", "https://sub.example.com/", "https://a.sub.example.com/",
		"ftp://example.com/", "ws://example.com/",
	}
	n := 0
	for _, e := range envs {
		theirs := (&httpproxy.Config{HTTPProxy: e[0], HTTPSProxy: e[1], NoProxy: e[2]}).ProxyFunc()
		ours := newEnvProxy(e[0], e[1], e[2]).proxy
		for _, raw := range urls {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			a, aerr := ours(u)
			b, berr := theirs(u)
			if fmt.Sprint(a, aerr) != fmt.Sprint(b, berr) {
				t.Errorf("env %q, %s: ours %v %v, httpproxy %v %v", e, raw, a, aerr, b, berr)
			}
			n++
		}
	}
	t.Logf("%d choices alike", n)
}
