package mcpclient

import (
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/axocoatl/axocoatl-go/internal/scrub"
	"github.com/axocoatl/axocoatl-go/secret"
)

// MinRedactLen is the shortest configured secret that is scrubbed (see
// internal/scrub for the rule): a shorter value cannot be scrubbed without
// garbling every text ("1", "yes"); it is left as is and the module warns,
// naming its key.
const MinRedactLen = scrub.MinLen

// credentialName reports whether an environment variable's name says it
// holds a credential: a stdio server that inherits the environment can
// read it and print it.
func credentialName(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "PASSW", "PASSPHRASE", "CREDENTIAL", "KEY", "AUTH", "PRIVATE", "COOKIE", "SESSION"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// newRedactor knows the server's own env and header values, the host's
// credentials in scrub and, for a stdio server that inherits the
// environment, every variable of the daemon's own environment whose name
// says it is a credential (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, …). The
// second result names the configured values too short to be scrubbed
// ("env.DEBUG", "scrub[2]").
func newRedactor(cfg ServerConfig, hostSecrets []secret.Secret) (*scrub.Scrubber, []string) {
	var vals scrub.Values
	for _, k := range sortedKeys(cfg.Env) {
		vals.Secret("env."+k, cfg.Env[k].Reveal())
	}
	for _, k := range sortedKeys(cfg.Headers) {
		vals.Secret("headers."+k, cfg.Headers[k].Reveal())
	}
	if o := cfg.OAuth; o != nil {
		vals.Secret("oauth.client_secret", o.ClientSecret.Reveal())
		vals.Secret("oauth.private_key", o.PrivateKey.Reveal())
	}
	for i, v := range hostSecrets {
		vals.Secret("scrub["+strconv.Itoa(i)+"]", v.Reveal())
	}
	if cfg.Transport() == "stdio" && cfg.inheritEnv() {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && credentialName(k) {
				vals.Secret("", v) // not configured here: nothing to warn about
			}
		}
	}
	vals.URL(cfg.URL)
	return vals.Scrubber(), vals.TooShort()
}

func sortedKeys(m map[string]secret.Secret) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
