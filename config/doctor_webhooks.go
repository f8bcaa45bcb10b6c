package config

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// DoctorOptions tune [Config.DoctorWith]. The zero value is
// [Config.Doctor]'s checks.
type DoctorOptions struct {
	// SendTest sends each webhook one signed test delivery (event_type
	// WebhookTest, see [egress.SendTest]) and fails the webhooks that do not
	// answer 2xx. Zero: only resolve and connect.
	SendTest bool
}

// checkWebhooks checks every webhook at once: that its host resolves and
// accepts a TCP connection (a failure otherwise), with opts.SendTest that a
// signed test delivery is taken (2xx); an unsigned webhook is a warning.
// Every step is bounded by the webhook's timeout and doctorTimeout.
func checkWebhooks(ctx context.Context, cfg *Config, r *Report, opts DoctorOptions) {
	infos := (egress.Config{Webhooks: cfg.Webhooks}).Describe()
	var wg sync.WaitGroup
	for i, w := range cfg.Webhooks {
		info := infos[i]
		check := "webhook " + w.Name
		r.addEgress(info.Host, check)
		if !info.Signed {
			r.warn(check, "unsigned: a receiver cannot tell its requests from anyone else's; set webhooks[].secret (and check it with egress.Verify)")
		}
		wg.Go(func() {
			detail, err := probeWebhook(ctx, w, opts, proxyOf(cfg.lookup))
			if err != nil {
				r.fail(check, fmt.Sprintf("%s: %v", info.URL, err))
				return
			}
			r.ok(check, fmt.Sprintf("%s, events: %s, signed: %v, %s", info.URL, info.Filter, info.Signed, detail))
		})
	}
	wg.Wait()
}

// probeWebhook resolves the webhook's host, connects to it and, with
// opts.SendTest, sends the test delivery. Its errors name the host and
// port only.
func probeWebhook(ctx context.Context, w egress.Webhook, opts DoctorOptions, proxy func(*url.URL) (*url.URL, error)) (string, error) {
	u, err := url.Parse(w.URL)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("not an absolute URL")
	}
	// Deliveries go through the proxy the environment names (egress's
	// transport is http.DefaultTransport's), so that is what must resolve
	// and accept a connection: behind a proxy the webhook's own host often
	// does not resolve at all. Only its host and port are shown.
	via := ""
	if p, err := proxy(u); err != nil {
		return "", fmt.Errorf("proxy from the environment: not a URL")
	} else if p != nil {
		u, via = p, " via proxy"
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	timeout := w.Timeout
	if timeout <= 0 || timeout > doctorTimeout {
		timeout = doctorTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := u.Hostname()
	addrs, err := net.DefaultResolver.LookupHost(pctx, host)
	if err != nil {
		return "", fmt.Errorf("host %s%s does not resolve: %v", host, via, unwrapDNS(err))
	}
	conn, err := (&net.Dialer{}).DialContext(pctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return "", fmt.Errorf("%s%s (%s) accepts no connection: %v", net.JoinHostPort(host, port), via, strings.Join(addrs, ", "), unwrapOp(err))
	}
	conn.Close()
	detail := net.JoinHostPort(host, port) + via + " accepts connections"
	if !opts.SendTest {
		return detail, nil
	}
	// The delivery is bounded as the other steps are: a webhook's own
	// timeout may be minutes, a doctor's is not.
	w.Timeout = timeout
	status, err := egress.SendTest(ctx, w)
	if err != nil {
		return "", fmt.Errorf("test delivery: %v", err)
	}
	if status < 200 || status > 299 {
		return "", fmt.Errorf("test delivery answered %d, want 2xx", status)
	}
	return fmt.Sprintf("%s, test delivery (%s) answered %d", detail, egress.TestEventType, status), nil
}

// proxyOf is the proxy choice of http.ProxyFromEnvironment (which the
// deliveries' transport uses) over the environment the config was read
// with: HTTP_PROXY, HTTPS_PROXY and NO_PROXY, in either case.
func proxyOf(lookup func(string) (string, bool)) func(*url.URL) (*url.URL, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	get := func(names ...string) string {
		for _, n := range names {
			if v, ok := lookup(n); ok && v != "" {
				return v
			}
		}
		return ""
	}
	return newEnvProxy(get("HTTP_PROXY", "http_proxy"), get("HTTPS_PROXY", "https_proxy"), get("NO_PROXY", "no_proxy")).proxy
}

// unwrapDNS and unwrapOp keep an error's cause ("no such host",
// "connection refused") without the operation's wording around it.
func unwrapDNS(err error) error {
	if de, ok := err.(*net.DNSError); ok {
		return fmt.Errorf("%s", de.Err)
	}
	return err
}

func unwrapOp(err error) error {
	if oe, ok := err.(*net.OpError); ok && oe.Err != nil {
		return oe.Err
	}
	return err
}

// launcherRegistry is the package registry a stdio launcher fetches from
// on (nearly) every start, and the variables that point it elsewhere; nil
// hosts for a command that is not a known launcher.
func launcherRegistry(command string) (envKeys, hosts []string) {
	switch filepath.Base(command) {
	case "npx":
		return []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"}, []string{"registry.npmjs.org"}
	case "uvx":
		return []string{"UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"}, []string{"pypi.org", "files.pythonhosted.org"}
	}
	return nil, nil
}

// addLauncherEgress records the package registry an npx or uvx child
// contacts as the server's egress.
func addLauncherEgress(cfg *Config, sc mcpclient.ServerConfig, r *Report) {
	envKeys, hosts := launcherRegistry(sc.Command)
	if hosts == nil {
		return
	}
	who := "mcp server " + sc.Name + " (" + filepath.Base(sc.Command) + " fetches its package)"
	for _, k := range envKeys {
		v := ""
		if s, ok := sc.Env[k]; ok {
			v = s.Reveal()
		} else if cfg.lookup != nil && (sc.InheritEnv == nil || *sc.InheritEnv) {
			v, _ = cfg.lookup(k)
		}
		// Only the host is shown: a registry URL may carry a token.
		if u, err := url.Parse(v); err == nil && u.Host != "" {
			r.addEgress(u.Host, who)
			return
		}
	}
	for _, h := range hosts {
		r.addEgress(h, who)
	}
}
