// Package dashboard serves the one-page web UI of package httpapi (the
// daemon's, and any host's that mounts config.Runtime): the agents with
// their tools, model and last run; the runs grouped by task (built from the
// recent history and the live events of the WebSocket GET /api/events), with
// their tool calls, outcome and raw events; the MCP servers and their state;
// a form to run an agent, one-shot or as the turns of a conversation, its
// answer growing as the model writes it (the run goes over the
// WebSocket's execute command; runs of other doors are followed by task id
// as they start, so their text grows in the runs list and in the open
// conversation too); the
// conversations (GET /api/conversations: the list by agent, newest first,
// paged; one conversation's messages with its tool calls and results; a box
// for its next turn; delete), refreshed by the TaskCompleted and
// AgentFailed events that carry a conversation_id, so a turn through
// another door (A2A, MCP) shows up; the pending approvals with Allow/Deny;
// the webhooks; the timeline of a run as a waterfall (GET
// /api/runs/{id}/timeline: its model calls, tool calls, approval waits and
// webhook deliveries as bars placed by offset and duration, read again on
// the run's events and every second while it goes); and the raw event feed. Against an API without
// conversations (GET /api/conversations answers 404) the page offers none
// of that and runs one-shot.
//
// What the page holds is bounded whatever the daemon sends: 300 runs (the
// live text of each up to 100,000 characters, 8 followed at once), 200
// feed lines, 200 conversations in the list, and at most 1,000 messages of
// the open one: its newest 100, earlier pages on request up to that bound,
// the oldest shown dropped as new turns come.
//
// The page is a single HTML document with its script and stylesheet inlined,
// embedded in the binary: no build step, nothing fetched from elsewhere. It
// talks only to the API of its own host, so it works wherever that API is
// mounted at the root of its host.
//
// In Go terms the package is one function: [Handler] returns the page as
// an [http.Handler], which the httpapi module serves at GET and HEAD /{$}
// (public: the page holds no data, the API calls it makes carry the
// token). It has no Config and no Module of its own, and imports nothing
// of the house.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the page is compiled in
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// The page's parts; they are kept apart so each stays readable and is
// inlined when the [Handler] is built.
var (
	//go:embed page/index.html
	indexHTML string
	//go:embed page/app.js
	appJS string
	//go:embed page/style.css
	styleCSS string
)

// Handler returns the handler of the dashboard page. It answers GET and HEAD
// of "/" and nothing else (404 for other paths, 405 for other methods), so
// it can be mounted on a catch-all route. The page needs no authentication:
// it asks the user for the API token when the API wants one.
func Handler() http.Handler {
	page := strings.Replace(indexHTML, "{{style}}", styleCSS, 1)
	page = strings.Replace(page, "{{script}}", appJS, 1)
	sum := sha256.Sum256([]byte(page))
	return &handler{
		page: []byte(page),
		etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
		// Inline code runs only if it is exactly the embedded code.
		scriptSrc: "'" + cspHash(appJS) + "'",
		styleSrc:  "'" + cspHash(styleCSS) + "'",
	}
}

type handler struct {
	page                []byte
	etag                string
	scriptSrc, styleSrc string
}

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// hostPattern accepts what a Host header legitimately holds: a DNS name or
// IPv4 address, or a bracketed IPv6 address, with an optional port. Anything
// else stays out of the policy header.
var hostPattern = regexp.MustCompile(`^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$`)

// csp is the Content-Security-Policy of the page: nothing loads or connects
// anywhere but this host, the WebSocket included (CSP level 3 lets 'self'
// cover ws: and wss:, older browsers need the host spelled out).
func (h *handler) csp(host string) string {
	connect := "'self'"
	if hostPattern.MatchString(host) {
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'none'; script-src " + h.scriptSrc + "; style-src " + h.styleSrc +
		"; connect-src " + connect + "; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route for %s", r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s is not allowed on /", r.Method))
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Security-Policy", h.csp(r.Host))
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	// Revalidate every time: a new binary brings a new page, and the ETag
	// makes the check cheap.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", h.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(h.page))
}

// writeError answers in the contract's error shape.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = code, message
	_ = json.NewEncoder(w).Encode(body)
}
