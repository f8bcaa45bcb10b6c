package a2aremote

import (
	"log/slog"
	"sort"
	"strconv"

	"github.com/axocoatl/axocoatl-go/internal/scrub"
	"github.com/axocoatl/axocoatl-go/secret"
)

// MinRedactLen is the shortest configured secret value that is scrubbed
// (see internal/scrub for the rule): a shorter one ("1", "yes") cannot be
// removed without garbling every text; the module warns, naming its key.
const MinRedactLen = scrub.MinLen

// newRedactor knows the agent's header values (and the token after
// "Bearer "), its URL's userinfo, query and key-like path segments, and the
// host's credentials in hostSecrets: what a remote agent says (results,
// errors) and our own errors (Go's HTTP errors quote whole URLs) are
// scrubbed of them before the model, a log line, an event or an error sees
// them. The second result names the configured values too short to be
// scrubbed ("headers.X-Pin", "scrub[2]").
func newRedactor(a AgentConfig, hostSecrets []secret.Secret) (*scrub.Scrubber, []string) {
	var vals scrub.Values
	keys := make([]string, 0, len(a.Headers))
	for k := range a.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the warnings come in a stable order
	for _, k := range keys {
		vals.Secret("headers."+k, a.Headers[k].Reveal())
	}
	for i, v := range hostSecrets {
		vals.Secret("scrub["+strconv.Itoa(i)+"]", v.Reveal())
	}
	vals.URL(a.URL)
	return vals.Scrubber(), vals.TooShort()
}

// warnTooShort names the configured secrets too short to be scrubbed.
func warnTooShort(log *slog.Logger, agent string, keys []string) {
	for _, k := range keys {
		log.Warn("a2a agent secret too short to redact: it is not scrubbed from what the agent says",
			"agent", agent, "key", k, "min_length", MinRedactLen)
	}
}
