// Package config reads the daemon's YAML file (server, providers, agents,
// mcp_servers, mcp_server, a2a, a2a_agents, lattice, …; docs/configuration.md)
// into plain structs and builds an Engine with its modules from
// it. The daemon in examples/daemon is a thin CLI over this package; a host
// loads the same file and gets the same Engine, or takes only the sections
// it wants (each section is the module's own Config struct).
//
// In Go terms: [Load] (or [Parse] for YAML text) gives a [*Config], whose
// fields are the modules' own structs ([agent.Spec], [mcpclient.ServerConfig],
// [mcpserver.Config], [a2a.Config], [approval.Config], [egress.Webhook],
// [cluster.Config]). [Config.Build] turns it into a [*Runtime]: an
// [axocoatl.Engine] on the lattice [LatticeConfig.Open] chose (in memory,
// or NATS), guarded by [Config.HTTPOptions], with each module made by its
// package's New and started by [axocoatl.Engine.Use] in an order that
// matters: the approval gate first (no tool is callable before it stands),
// egress, the tool sources (mcpclient, a2aremote), then the doors (mcpserver,
// a2a, httpapi) and, on NATS, the cluster module last so that it stops
// first. A host mounts the doors on its own mux with [Runtime.Mount], or
// serves [Runtime.Handler] as the daemon does, and ends with
// [Runtime.Shutdown] and [Runtime.Close]. [Config.Doctor] checks what a
// config will reach without building anything.
//
// Loading: `${VAR}` and `${VAR:-default}` expand in string values after
// parsing (never in the raw text; `$${` is a literal `${`); unknown keys
// inside a known section are errors, unknown top-level sections warnings;
// the AXOCOATL_* variables override the file. Every error is a
// [*FieldError] naming the file, the line and the key; none contains a
// secret.
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/yamlconf"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
	"github.com/axocoatl/axocoatl-go/mcpclient"
	"github.com/axocoatl/axocoatl-go/mcpserver"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Config is the whole config file, as [Load] and [Parse] return it. Each
// module's section is that module's own Config struct, decoded straight
// from the YAML; [Config.Build] makes the Engine of it.
type Config struct {
	Server    ServerConfig     `yaml:"server"`
	Log       LogConfig        `yaml:"log"`
	Providers provider.Configs `yaml:"providers"`
	Agents    []agent.Spec     `yaml:"agents"`
	Lattice   LatticeConfig    `yaml:"lattice"`
	// MCPServers are the MCP servers whose tools the agents may call
	// (the [mcpclient.Module] tool source).
	MCPServers MCPServers `yaml:"mcp_servers"`
	// MCPServer tunes the agents' own MCP server (/mcp, `mcp serve`), a
	// door: [mcpserver.Server].
	MCPServer mcpserver.Config `yaml:"mcp_server"`
	// A2A tunes the A2A doors (cards, /a2a/tasks, JSON-RPC): [a2a.Handler].
	A2A a2a.Config `yaml:"a2a"`
	// A2AAgents are the remote A2A agents the agents may call as tools
	// a2a__<name> (the [a2aremote.Module] tool source).
	A2AAgents A2AAgents `yaml:"a2a_agents"`
	// Approval is the human-approval gate on tool calls
	// ([approval.Module]).
	Approval approval.Config `yaml:"approval"`
	// Webhooks are where lattice events are POSTed, signed, by the
	// [egress.Module] observer.
	Webhooks Webhooks `yaml:"webhooks"`
	// Push is push delivery, the A2A push notifications' way out: signed
	// and durable as the webhooks ([egress.Push]).
	Push egress.Push `yaml:"push"`
	// Cluster tunes how daemons on one NATS lattice share their agents
	// ([cluster.Module]; used only with lattice.backend nats).
	Cluster cluster.Config `yaml:"cluster"`
	// Conversations is where agents' conversations are kept, and their
	// bounds.
	Conversations ConversationsConfig `yaml:"conversations"`
	// Telemetry exports OpenTelemetry spans (off by default;
	// docs/telemetry.md).
	Telemetry TelemetryConfig `yaml:"telemetry"`

	// Source is where the config came from: a path, or "<built-in>".
	Source string `yaml:"-"`
	// Warnings found while loading (unknown top-level sections).
	Warnings []string `yaml:"-"`
	doc      *yamlconf.Doc
	// publicURLSet records that server.public_url came from the file, so
	// a server does not replace it with the bound address.
	publicURLSet bool
	// overrides maps a key set from the environment or a flag to that
	// variable or flag, so an error about its value blames the right place.
	overrides map[string]string
	// lookup is the environment the config was read with; provider keys
	// (OPENAI_API_KEY, …) come from it too.
	lookup func(string) (string, bool)
}

// FieldError is one problem in a config file: File, Line (0 when the key
// is not in the file), Key (a dotted path such as agents[1].id) and Msg.
// [Load], [Parse] and [Config.Build] return them, joined; find them with
// [errors.As].
type FieldError = yamlconf.Error

// Webhooks is the `webhooks:` list; it validates unique names (each entry,
// an [egress.Webhook], validates itself).
type Webhooks []egress.Webhook

// Validate checks that names are unique ([egress.ValidateNames]).
func (l Webhooks) Validate() error { return egress.ValidateNames(l) }

// MCPServers is the `mcp_servers:` list. It validates what the entries
// cannot see alone: unique names (each entry validates itself).
type MCPServers []mcpclient.ServerConfig

// Validate checks that names are unique ([mcpclient.ValidateNames]).
func (l MCPServers) Validate() error { return mcpclient.ValidateNames(l) }

// A2AAgents is the `a2a_agents:` list. It validates unique names (each
// entry validates itself).
type A2AAgents []a2aremote.AgentConfig

// Validate checks that names are unique ([a2aremote.ValidateNames]).
func (l A2AAgents) Validate() error { return a2aremote.ValidateNames(l) }

// ServerConfig is the `server:` section.
type ServerConfig struct {
	// Addr is the listen address. Zero: 127.0.0.1:8080.
	Addr string `yaml:"addr"`
	// PublicURL is the absolute base URL others reach this daemon at (A2A
	// cards). Zero: http://<addr> with the port actually bound; "" when
	// addr is 0.0.0.0 or [::] (then each request's Host is used).
	PublicURL string `yaml:"public_url"`
	// APIToken is required as Bearer token or X-API-Key on every route but
	// /health*, the agent cards and /. Zero: no authentication, allowed
	// only on a loopback address (or with AllowUnauthenticated).
	APIToken secret.Secret `yaml:"api_token"`
	// Tokens are scoped static tokens beside APIToken (which carries every
	// scope): each {name, token, scopes (read, execute, approve, admin),
	// agents (globs)} names its caller in logs and verdicts, and sees and
	// runs only the agents its globs admit, on every door. Zero: none.
	Tokens []axocoatl.Token `yaml:"tokens"`
	// Auth holds the other ways in: oauth makes the doors OAuth protected
	// resources that accept JWT access tokens.
	Auth ServerAuth `yaml:"auth"`
	// AllowUnauthenticated permits a non-loopback Addr without APIToken.
	// Zero: false, such a daemon refuses to start.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated"`
	// AllowedOrigins are browser origins, besides this host's own pages,
	// allowed on every door; without a token their hosts are also accepted
	// as Host names. Forms: "https://app.example.com",
	// "https://*.example.com", "http://localhost:*", "app.example.com",
	// "*.example.com" (any scheme). Zero: only pages served from this host.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// RequestTimeout bounds one API request (an execute waits at most
	// this long, then answers 504). Zero: 5m.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// BodyTimeout bounds reading one request body. Zero: 30s.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// WriteTimeout bounds each write of a response: a client that stops
	// reading is cut after it. Zero: 30s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxAuthFailures bounds wrong API tokens per client and 10 s window
	// (then 429 with Retry-After). Zero: 10; negative: no bound.
	MaxAuthFailures int `yaml:"max_auth_failures"`
	// MaxConcurrentRuns bounds the tasks in flight at once, every door
	// together (then 503 busy). Zero: 1000; negative: no bound.
	MaxConcurrentRuns int `yaml:"max_concurrent_runs"`
	// ShutdownGrace is how long in-flight requests and runs may take to
	// finish after SIGINT/SIGTERM. Zero: 30s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// DataDir holds state that outlives a run (remembered approvals,
	// webhook deliveries); Load makes a relative one relative to the config
	// file's directory. Zero: ./data.
	DataDir string `yaml:"data_dir"`
	// OAuthTokenKey is the secret the OAuth tokens of mcp_servers entries
	// with `oauth:` are encrypted with in data_dir (AES-256-GCM, a key
	// derived from it), at least 16 characters; AXOCOATL_OAUTH_TOKEN_KEY
	// overrides it. Required when an entry uses grant authorization_code.
	// Zero: none.
	OAuthTokenKey secret.Secret `yaml:"oauth_token_key"`
	// MCPServeHTTP is the address `axocoatl mcp serve` also serves the
	// dashboard and the HTTP API (approvals among them) on, beside stdio,
	// under the same guard and token rules as Addr (loopback unless
	// APIToken is set); its --http flag overrides it. Zero: stdio only.
	MCPServeHTTP string `yaml:"mcp_serve_http"`
}

// authErrors checks server.tokens and server.auth.oauth.
func (c *Config) authErrors() []error {
	d := c.doc
	errs := d.FieldErrors("server", axocoatl.ValidateTokens(c.Server.APIToken, c.Server.Tokens))
	return append(errs, d.FieldErrors("server.auth.oauth", c.Server.Auth.OAuth.Validate())...)
}

// oauthKeyErrors checks server.oauth_token_key: long enough, and set when
// an mcp_servers entry logs in with grant authorization_code (its tokens
// are kept encrypted in data_dir).
func (c *Config) oauthKeyErrors() []error {
	key := c.Server.OAuthTokenKey.Reveal()
	if key != "" && len(key) < mcpclient.MinTokenKeyLen {
		return []error{c.errorf("server.oauth_token_key", "is %d characters long: use at least %d (for example the output of `openssl rand -hex 24`)", len(key), mcpclient.MinTokenKeyLen)}
	}
	if key != "" {
		return nil
	}
	for i, s := range c.MCPServers {
		if s.OAuth != nil && (s.OAuth.Grant == "" || s.OAuth.Grant == mcpclient.GrantAuthorizationCode) {
			return []error{c.errorf(fmt.Sprintf("mcp_servers[%d].oauth", i), "grant authorization_code keeps its tokens encrypted in data_dir: set server.oauth_token_key (or AXOCOATL_OAUTH_TOKEN_KEY), at least %d characters", mcpclient.MinTokenKeyLen)}
		}
	}
	return nil
}

// Authenticated reports whether the doors ask for credentials: an
// api_token, scoped tokens or OAuth.
func (s ServerConfig) Authenticated() bool {
	return !s.APIToken.IsZero() || len(s.Tokens) > 0 || s.Auth.OAuth != nil
}

// ServerAuth is `server.auth`.
type ServerAuth struct {
	// OAuth, when set, admits JWT access tokens of one authorization
	// server (issuer, audience, jwks_url or discovery). Zero: none.
	OAuth *axocoatl.OAuthOptions `yaml:"oauth"`
}

// HTTPOptions is how the Engine guards every HTTP door, from the server
// section: the [axocoatl.Options].HTTP that [Config.Build] passes to
// [axocoatl.New]. A public URL defaulted from a listen address on port 0 is left
// out: the real port is known only per request, from its Host.
func (c *Config) HTTPOptions() axocoatl.HTTPOptions {
	public := c.Server.PublicURL
	if u, err := url.Parse(public); err == nil && u.Port() == "0" {
		public = ""
	}
	return axocoatl.HTTPOptions{
		PublicURL:       public,
		APIToken:        c.Server.APIToken,
		AllowedOrigins:  c.Server.AllowedOrigins,
		BodyTimeout:     c.Server.BodyTimeout,
		WriteTimeout:    c.Server.WriteTimeout,
		MaxAuthFailures: c.Server.MaxAuthFailures,
		Tokens:          c.Server.Tokens,
		OAuth:           c.Server.Auth.OAuth,
	}
}

// SetListenAddr records the address a server actually bound (port 0
// resolved): server.public_url defaults from it unless the file set one.
func (c *Config) SetListenAddr(addr string) {
	if !c.publicURLSet {
		c.Server.PublicURL = defaultPublicURL(addr)
	}
}

// Defaults of the server section.
const (
	DefaultAddr           = "127.0.0.1:8080"
	DefaultRequestTimeout = 5 * time.Minute
	DefaultShutdownGrace  = 30 * time.Second
	DefaultDataDir        = "./data"
	DefaultBodyTimeout    = 30 * time.Second
)

// WithDefaults fills zero fields.
func (s ServerConfig) WithDefaults() ServerConfig {
	if s.Addr == "" {
		s.Addr = DefaultAddr
	}
	if s.PublicURL == "" {
		s.PublicURL = defaultPublicURL(s.Addr)
	}
	s.PublicURL = strings.TrimRight(s.PublicURL, "/")
	if s.RequestTimeout == 0 {
		s.RequestTimeout = DefaultRequestTimeout
	}
	if s.BodyTimeout == 0 {
		s.BodyTimeout = DefaultBodyTimeout
	}
	if s.ShutdownGrace == 0 {
		s.ShutdownGrace = DefaultShutdownGrace
	}
	if s.DataDir == "" {
		s.DataDir = DefaultDataDir
	}
	return s
}

// defaultPublicURL is http://<addr>, or "" when addr names no host others
// could reach (an unspecified address, or port 0 before listening).
func defaultPublicURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return ""
	}
	return "http://" + net.JoinHostPort(host, port)
}

// LogConfig is the `log:` section.
type LogConfig struct {
	// Level: debug | info | warn | error. Zero: info.
	Level string `yaml:"level"`
	// Format: text | json. Zero: text.
	Format string `yaml:"format"`
}

// LatticeConfig is the `lattice:` section.
type LatticeConfig struct {
	// Backend: memory | nats. Zero: memory.
	Backend string `yaml:"backend"`
	// NATSURL of the NATS server when Backend is nats (several may be
	// given comma-separated). Zero: nats://127.0.0.1:4222.
	NATSURL string `yaml:"nats_url"`
	// Prefix of the NATS subjects; daemons sharing a prefix share one
	// lattice. Zero: axocoatl.
	Prefix string `yaml:"prefix"`
	// Node names this daemon on a NATS lattice (where its agents run, who
	// produced an event). It must differ between daemons. Zero: the host
	// name and a random suffix, new at each start.
	Node string `yaml:"node"`
	// ReconnectBufferBytes bounds, in bytes, what this daemon publishes while
	// NATS is away: the client reconnects forever (every 1s, with jitter)
	// and sends the buffer once back; a publish beyond it fails, is
	// counted (lattice/nats Bus.Failed) and shows as missed to every
	// subscriber (a WebSocket client's "lagged"). Zero: 8 MiB; -1: no
	// buffer (every publish while disconnected fails).
	ReconnectBufferBytes int `yaml:"reconnect_buffer_bytes"`
	// JetStream names what webhooks use on a NATS lattice.
	JetStream JetStreamConfig `yaml:"jetstream"`
	// Auth is how this daemon authenticates to NATS, one of: creds_file (a
	// .creds file: user JWT and nkey seed), nkey_seed_file, user and
	// password, token (secrets). Zero: none beyond what nats_url carries.
	Auth latticenats.Auth `yaml:"auth"`
	// TLS of the connection: ca_file, cert_file and key_file (a client
	// certificate), server_name. Setting any turns TLS on, as a tls:// URL
	// does. Zero: TLS only when the URL or the server asks, verified
	// against the system's roots.
	TLS latticenats.TLS `yaml:"tls"`
}

// Security is the section's credentials and TLS, as [latticenats.Connect]
// takes them.
func (l LatticeConfig) Security() latticenats.Security {
	return latticenats.Security{Auth: l.Auth, TLS: l.TLS}
}

// JetStreamConfig is `lattice.jetstream:`: where webhook deliveries wait
// when the lattice is NATS (a work queue shared by every daemon on it, see
// [egress.JetStream]). Created if missing.
type JetStreamConfig struct {
	// Stream of pending deliveries; dead letters go to Stream+"_DEAD".
	// Zero: the prefix in upper case with "_EGRESS" (AXOCOATL_EGRESS).
	Stream string `yaml:"stream"`
	// Consumer prefixes the durable consumers, one per webhook
	// (<consumer>_<webhook>), shared by every daemon. Zero: the prefix with
	// "_egress" (axocoatl_egress).
	Consumer string `yaml:"consumer"`
	// AckWait: how long a delivery in progress on a daemon that went silent
	// (killed, cut off) waits before another daemon takes it. Zero: 30s.
	AckWait time.Duration `yaml:"ack_wait"`
}

// DefaultReconnectBuffer is lattice.reconnect_buffer_bytes's default: nats.go's.
const DefaultReconnectBuffer = 8 << 20

// DefaultNATSURL is used when lattice.nats_url is empty.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// validate checks the lattice section; errors name their key.
func (l LatticeConfig) validate(d *yamlconf.Doc, errorf func(key, format string, args ...any) error) []error {
	switch l.Backend {
	case "", "memory", "nats":
	default:
		return []error{d.Errorf("lattice.backend", "%q is unknown (memory | nats)", l.Backend)}
	}
	var errs []error
	if l.NATSURL != "" {
		for _, u := range strings.Split(l.NATSURL, ",") {
			p, err := url.Parse(strings.TrimSpace(u))
			if err != nil || p.Host == "" {
				errs = append(errs, errorf("lattice.nats_url", "want nats://host:port or tls://host:port (comma-separated for several)"))
				break
			}
		}
	}
	if l.Prefix != "" && !natsToken.MatchString(l.Prefix) {
		errs = append(errs, d.Errorf("lattice.prefix", "%q must be letters, digits, _ and - (dots allowed between them)", l.Prefix))
	}
	if l.Node != "" && !nodeName.MatchString(l.Node) {
		errs = append(errs, d.Errorf("lattice.node", "%q must be 1-64 letters, digits, _ and -", l.Node))
	}
	if l.ReconnectBufferBytes < -1 {
		errs = append(errs, d.Errorf("lattice.reconnect_buffer_bytes", "must be a size in bytes, 0 for the default (8 MiB) or -1 for none"))
	}
	js := l.JetStream
	if js.Stream != "" && !egress.ValidJetStreamName(js.Stream) {
		errs = append(errs, d.Errorf("lattice.jetstream.stream", "%q: want 1-200 characters without spaces, '.', '*', '>', '/' or '\\'", js.Stream))
	}
	if js.Consumer != "" && !egress.ValidJetStreamName(js.Consumer) {
		errs = append(errs, d.Errorf("lattice.jetstream.consumer", "%q: want 1-200 characters without spaces, '.', '*', '>', '/' or '\\'", js.Consumer))
	}
	if js.AckWait < 0 || js.AckWait > 0 && js.AckWait < time.Second {
		errs = append(errs, d.Errorf("lattice.jetstream.ack_wait", "must be at least 1s (zero: 30s)"))
	}
	return errs
}

var (
	natsToken = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	nodeName  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// movedKeys are module keys that became server keys when every door got
// the one HTTP guard: a config that still sets one is told where it went.
var movedKeys = map[string]string{
	"a2a.public_url": "server.public_url", "a2a.api_token": "server.api_token",
	"a2a.allowed_origins": "server.allowed_origins", "a2a.body_timeout": "server.body_timeout",
	"mcp_server.allowed_origins": "server.allowed_origins", "mcp_server.body_timeout": "server.body_timeout",
}

// BuiltinSource is the [Config].Source of a config read from
// [LoadOptions].Default.
const BuiltinSource = "<built-in>"

// envOverrides are the AXOCOATL_* variables; they win over the file.
type envOverrides struct {
	Config    *string        `env:"AXOCOATL_CONFIG"`
	Addr      *string        `env:"AXOCOATL_ADDR"`
	APIToken  *secret.Secret `env:"AXOCOATL_API_TOKEN"`
	TokenKey  *secret.Secret `env:"AXOCOATL_OAUTH_TOKEN_KEY"`
	DataDir   *string        `env:"AXOCOATL_DATA_DIR"`
	LogLevel  *string        `env:"AXOCOATL_LOG_LEVEL"`
	LogFormat *string        `env:"AXOCOATL_LOG_FORMAT"`
	// The lattice's NATS connection (docs/cluster.md): any of the four
	// credentials replaces lattice.auth as a whole; the TLS files replace
	// their key each.
	NATSURL      *string        `env:"AXOCOATL_NATS_URL"`
	NATSCreds    *string        `env:"AXOCOATL_NATS_CREDS"`
	NATSNKey     *string        `env:"AXOCOATL_NATS_NKEY"`
	NATSUser     *string        `env:"AXOCOATL_NATS_USER"`
	NATSPassword *secret.Secret `env:"AXOCOATL_NATS_PASSWORD"`
	NATSToken    *secret.Secret `env:"AXOCOATL_NATS_TOKEN"`
	NATSCA       *string        `env:"AXOCOATL_NATS_CA"`
	NATSCert     *string        `env:"AXOCOATL_NATS_CERT"`
	NATSKey      *string        `env:"AXOCOATL_NATS_KEY"`
	// The cluster's keys (docs/cluster.md, trust model): the key, and
	// the accepted keys comma-separated.
	ClusterKey          *secret.Secret `env:"AXOCOATL_CLUSTER_KEY"`
	ClusterAcceptedKeys *secret.Secret `env:"AXOCOATL_CLUSTER_ACCEPTED_KEYS"`
}

// natsAuthVars name the variable of each lattice.auth key.
var natsAuthVars = map[string]string{"creds_file": "AXOCOATL_NATS_CREDS", "nkey_seed_file": "AXOCOATL_NATS_NKEY",
	"user": "AXOCOATL_NATS_USER", "password": "AXOCOATL_NATS_PASSWORD", "token": "AXOCOATL_NATS_TOKEN"}

// overrideNATS applies the AXOCOATL_NATS_* variables.
func (c *Config) overrideNATS(env envOverrides) {
	str := func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	}
	sec := func(v *secret.Secret) secret.Secret {
		if v == nil {
			return ""
		}
		return *v
	}
	set := func(dst *string, v *string, key, source string) {
		if v != nil && *v != "" {
			*dst = *v
			c.overrides[key] = source
		}
	}
	set(&c.Lattice.NATSURL, env.NATSURL, "lattice.nats_url", "AXOCOATL_NATS_URL")
	auth := latticenats.Auth{CredsFile: str(env.NATSCreds), NKeySeedFile: str(env.NATSNKey),
		User: str(env.NATSUser), Password: sec(env.NATSPassword), Token: sec(env.NATSToken)}
	if auth != (latticenats.Auth{}) {
		c.Lattice.Auth = auth
		// What is wrong (a missing user too) is the variables' doing.
		for key, v := range natsAuthVars {
			c.overrides["lattice.auth."+key] = v
		}
		c.overrides["lattice.auth"] = "the AXOCOATL_NATS_* credentials"
	}
	set(&c.Lattice.TLS.CAFile, env.NATSCA, "lattice.tls.ca_file", "AXOCOATL_NATS_CA")
	set(&c.Lattice.TLS.CertFile, env.NATSCert, "lattice.tls.cert_file", "AXOCOATL_NATS_CERT")
	set(&c.Lattice.TLS.KeyFile, env.NATSKey, "lattice.tls.key_file", "AXOCOATL_NATS_KEY")
}

// latticeSecurityErrors checks lattice.auth and lattice.tls (their files
// too) when the lattice is NATS; each error names its key, or the variable
// that set it.
func (c *Config) latticeSecurityErrors() []error {
	l := c.Lattice
	if l.Backend != "nats" {
		return nil
	}
	var errs []error
	for _, e := range cfgerr.Split(l.Security().Validate()) {
		errs = append(errs, c.errorf(cfgerr.Join("lattice", e.Key), "%s", e.Msg))
	}
	if l.Auth.Method() != "" {
		for _, u := range strings.Split(l.NATSURL, ",") {
			if p, err := url.Parse(strings.TrimSpace(u)); err == nil && p.User != nil {
				errs = append(errs, c.errorf("lattice.nats_url", "carries credentials (user@host) and lattice.auth sets others: keep one"))
				break
			}
		}
	}
	return errs
}

// LoadOptions say where a config comes from for [Load]. Zero fields: the
// process's.
type LoadOptions struct {
	// Path of the file. Zero: $AXOCOATL_CONFIG, else ./axocoatl.yaml, else
	// Default.
	Path string
	// Addr overrides server.addr (a --addr flag). Zero: from env or file.
	Addr string
	// Lookup reads the environment. Zero: os.LookupEnv.
	Lookup func(string) (string, bool)
	// Default is the YAML used when no file is found. Zero: no default (an
	// error saying where a file was looked for).
	Default []byte
}

// Load finds, parses, expands, overrides and validates the config. Every
// error names the file, line and key; none contains a secret.
func Load(ctx context.Context, opts LoadOptions) (*Config, error) {
	lookup := opts.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env, err := readEnv(ctx, lookup)
	if err != nil {
		return nil, err
	}

	path := opts.Path
	if path == "" && env.Config != nil {
		path = *env.Config // empty: keep looking
	}
	data, source := opts.Default, BuiltinSource
	switch {
	case path != "":
		b, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		data, source = b, path
	default:
		if b, err := readFile("axocoatl.yaml"); err == nil {
			data, source = b, "axocoatl.yaml"
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("config: %w", err)
		} else if data == nil {
			return nil, errors.New("config: no file given (--config or AXOCOATL_CONFIG) and no ./axocoatl.yaml")
		}
	}
	cfg, err := parse(source, data, lookup, env, opts.Addr)
	if err != nil {
		return nil, err
	}
	cfg.resolveDataDir()
	return cfg, nil
}

// MaxFileBytes bounds the config file [Load] reads: a path that names a
// device or a runaway file (--config /dev/zero) is refused instead of read
// until memory runs out.
const MaxFileBytes = 4 << 20

// ErrFileTooLarge is returned by [Load] for a file over [MaxFileBytes].
var ErrFileTooLarge = errors.New("config file is larger than 4 MiB")

// readFile reads the config file at path, at most MaxFileBytes of it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: %w", path, ErrFileTooLarge)
	}
	return b, nil
}

// Parse reads a config from YAML text with the process's environment
// (variables and AXOCOATL_* overrides); source names it in errors. It is
// [Load] without the search for a file, and without what needs one: a
// relative server.data_dir stays relative to the working directory
// (source need not be a path), where Load makes it relative to the file's.
func Parse(source string, data []byte) (*Config, error) {
	return ParseWith(context.Background(), source, data, os.LookupEnv)
}

// readEnv reads the AXOCOATL_* overrides through lookup.
func readEnv(ctx context.Context, lookup func(string) (string, bool)) (envOverrides, error) {
	var env envOverrides
	err := envconfig.ProcessWith(ctx, &envconfig.Config{
		Target:        &env,
		Lookuper:      envconfig.LookuperFunc(lookup),
		DefaultNoInit: true,
	})
	if err != nil {
		return env, fmt.Errorf("environment: %w", err)
	}
	return env, nil
}

// ParseWith is [Parse] with the environment read through lookup.
func ParseWith(ctx context.Context, source string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	env, err := readEnv(ctx, lookup)
	if err != nil {
		return nil, err
	}
	return parse(source, data, lookup, env, "")
}

func parse(source string, data []byte, lookup yamlconf.Lookup, env envOverrides, addr string) (*Config, error) {
	doc, err := yamlconf.Parse(source, data)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Source: source, doc: doc}
	// One run reports every error of the file: moved keys, then what the
	// decoder found (unknown keys, type errors, unset variables), then what
	// validation finds, except at a key that already failed to decode.
	var errs []error
	for key, to := range movedKeys {
		if doc.Has(key) {
			errs = append(errs, doc.Errorf(key, "set %s instead (it applies to every door)", to))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	var decodeErr error
	cfg.Warnings, decodeErr = doc.Decode(cfg, lookup)
	for _, fe := range fieldErrors(decodeErr) {
		if _, moved := movedKeys[fe.Key]; !moved { // said above, better
			errs = append(errs, fe)
		}
	}
	// An empty variable is treated as unset: AXOCOATL_API_TOKEN= must not
	// silently switch off the file's token.
	cfg.overrides = map[string]string{}
	cfg.lookup = lookup
	set := func(dst *string, v *string, key, source string) {
		if v != nil && *v != "" {
			*dst = *v
			cfg.overrides[key] = source
		}
	}
	set(&cfg.Server.Addr, env.Addr, "server.addr", "AXOCOATL_ADDR")
	set(&cfg.Server.Addr, &addr, "server.addr", "--addr")
	if env.APIToken != nil && !env.APIToken.IsZero() {
		cfg.Server.APIToken = *env.APIToken
		cfg.overrides["server.api_token"] = "AXOCOATL_API_TOKEN"
	}
	if env.TokenKey != nil && !env.TokenKey.IsZero() {
		cfg.Server.OAuthTokenKey = *env.TokenKey
		cfg.overrides["server.oauth_token_key"] = "AXOCOATL_OAUTH_TOKEN_KEY"
	}
	set(&cfg.Server.DataDir, env.DataDir, "server.data_dir", "AXOCOATL_DATA_DIR")
	set(&cfg.Log.Level, env.LogLevel, "log.level", "AXOCOATL_LOG_LEVEL")
	set(&cfg.Log.Format, env.LogFormat, "log.format", "AXOCOATL_LOG_FORMAT")
	cfg.overrideNATS(env)
	if env.ClusterKey != nil && !env.ClusterKey.IsZero() {
		cfg.Cluster.Key = *env.ClusterKey
		cfg.overrides["cluster.key"] = "AXOCOATL_CLUSTER_KEY"
	}
	if env.ClusterAcceptedKeys != nil && !env.ClusterAcceptedKeys.IsZero() {
		cfg.Cluster.AcceptedKeys = nil
		for _, k := range strings.Split(env.ClusterAcceptedKeys.Reveal(), ",") {
			if k = strings.TrimSpace(k); k != "" {
				cfg.Cluster.AcceptedKeys = append(cfg.Cluster.AcceptedKeys, secret.Secret(k))
			}
		}
		cfg.overrides["cluster.accepted_keys"] = "AXOCOATL_CLUSTER_ACCEPTED_KEYS"
	}
	for _, fe := range fieldErrors(cfg.validate()) {
		if fe.Source != "" || !doc.Failed(fe.Key) {
			errs = append(errs, fe)
		}
	}
	// After the file's section validated: the variables fill what it
	// left unset, each checked and blamed by its name.
	errs = append(errs, cfg.overrideTelemetry(lookup)...)
	if len(errs) > 0 {
		// In the file's order, top to bottom; those of no line (a
		// variable's, a flag's) last.
		slices.SortStableFunc(errs, func(a, b error) int { return cmpLine(lineOf(a), lineOf(b)) })
		return nil, errors.Join(errs...)
	}
	cfg.publicURLSet = cfg.Server.PublicURL != ""
	cfg.Server = cfg.Server.WithDefaults()
	return cfg, nil
}

// fieldErrors lists the errors joined in err, each a *FieldError (an error
// of another type, which the loader does not make, becomes one naming the
// file only).
func fieldErrors(err error) []*FieldError {
	var out []*FieldError
	for _, leaf := range cfgerr.Leaves(err) {
		var fe *FieldError
		if !errors.As(leaf, &fe) {
			fe = &FieldError{Msg: leaf.Error()}
		}
		out = append(out, fe)
	}
	return out
}

func lineOf(err error) int {
	if fe, ok := err.(*FieldError); ok && fe.Source == "" {
		return fe.Line
	}
	return 0
}

// cmpLine orders lines with 0 (none) last.
func cmpLine(a, b int) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	}
	return a - b
}

// provider is the providers: entry of kind (zero when the file has none)
// reading its key variable (OPENAI_API_KEY, …) from the environment the
// config was read with, so validation, the models and doctor agree.
func (c *Config) provider(kind string) provider.Config {
	pc := c.Providers[kind]
	pc.LookupEnv = c.lookup
	return pc
}

// Errorf returns a [*FieldError] about key (a dotted path such as
// "agents[1].id"), at its line in the file.
func (c *Config) Errorf(key, format string, args ...any) error { return c.errorf(key, format, args...) }

// errorf reports a bad value at key: at the file's line, or, when the
// value came from the environment or a flag, naming that instead.
func (c *Config) errorf(key, format string, args ...any) error {
	if source, ok := c.overrides[key]; ok {
		return &FieldError{File: c.Source, Key: key, Msg: fmt.Sprintf(format, args...), Source: source}
	}
	return c.doc.Errorf(key, format, args...)
}

// validate checks every section; errors name file, line and key.
func (c *Config) validate() error {
	d := c.doc
	var errs []error
	if a := c.Server.Addr; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, c.errorf("server.addr", "%q is not host:port", a))
		}
	}
	if u := c.Server.PublicURL; u != "" {
		if p, err := url.Parse(u); err != nil || p.Scheme == "" || p.Host == "" {
			errs = append(errs, d.Errorf("server.public_url", "must be an absolute URL like http://host:port"))
		}
	}
	if tok := c.Server.APIToken.Reveal(); tok != "" && strings.ContainsAny(tok, " \t\r\n") {
		errs = append(errs, c.errorf("server.api_token", "must not contain whitespace"))
	} else if tok != "" && len(tok) < httpguard.MinTokenLength {
		errs = append(errs, c.errorf("server.api_token", "is %d characters long: use at least %d (for example the output of `openssl rand -hex 24`)", len(tok), httpguard.MinTokenLength))
	}
	errs = append(errs, d.FieldErrors("server", httpguard.ValidateOrigins(c.Server.AllowedOrigins))...)
	errs = append(errs, c.authErrors()...)
	errs = append(errs, c.oauthKeyErrors()...)
	if c.Server.RequestTimeout < 0 {
		errs = append(errs, d.Errorf("server.request_timeout", "must not be negative"))
	}
	if c.Server.BodyTimeout < 0 {
		errs = append(errs, d.Errorf("server.body_timeout", "must not be negative"))
	}
	if c.Server.WriteTimeout < 0 {
		errs = append(errs, d.Errorf("server.write_timeout", "must not be negative"))
	}
	if c.Server.ShutdownGrace < 0 {
		errs = append(errs, d.Errorf("server.shutdown_grace", "must not be negative"))
	}
	switch strings.ToLower(c.Log.Level) {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, c.errorf("log.level", "%q is not one of debug, info, warn, error", c.Log.Level))
	}
	switch c.Log.Format {
	case "", "text", "json":
	default:
		errs = append(errs, c.errorf("log.format", "%q is not one of text, json", c.Log.Format))
	}
	for kind, pc := range c.Providers {
		if !provider.Known(kind) {
			errs = append(errs, d.Errorf("providers."+kind, "unknown provider (known: %s)", strings.Join(provider.Kinds, ", ")))
			continue
		}
		errs = append(errs, d.FieldErrors("providers."+kind, pc.Validate())...)
	}
	if len(c.Agents) == 0 {
		errs = append(errs, d.Errorf("agents", "at least one agent is required"))
	}
	// Settings that only a NATS lattice reads are said to be ignored, so
	// an operator does not believe a cluster is configured.
	if c.Lattice.Backend != "nats" {
		for _, key := range []string{"cluster", "lattice.jetstream", "lattice.reconnect_buffer_bytes", "lattice.node", "lattice.auth", "lattice.tls"} {
			if d.Has(key) {
				c.Warnings = append(c.Warnings, fmt.Sprintf("line %d: %s is ignored: lattice.backend is not nats (this daemon runs alone)", d.Line(key), key))
			}
		}
	}
	// A provider an agent uses needs a key from the file or its variable
	// (a server that may need none gets a warning), checked once per kind.
	keyChecked := map[string]bool{}
	for i, a := range c.Agents {
		if keyChecked[a.Provider] || !provider.Known(a.Provider) {
			continue
		}
		keyChecked[a.Provider] = true
		if warn, err := provider.CheckKey(a.Provider, c.provider(a.Provider)); err != nil {
			errs = append(errs, d.Errorf(fmt.Sprintf("agents[%d].provider", i), "%v", err))
		} else if warn != "" {
			c.Warnings = append(c.Warnings, warn)
		}
	}
	seen := map[string]int{}
	for i, a := range c.Agents {
		at := fmt.Sprintf("agents[%d]", i)
		switch {
		case a.ID == "":
			errs = append(errs, d.Errorf(at, "id is required"))
		case !agent.ValidID(a.ID):
			errs = append(errs, d.Errorf(at+".id", "%q must match [a-z0-9_-]+ (at most 64 characters)", a.ID))
		default:
			if j, dup := seen[a.ID]; dup {
				errs = append(errs, d.Errorf(at+".id", "duplicate agent id %q (first at line %d)", a.ID, d.Line(fmt.Sprintf("agents[%d].id", j))))
			} else {
				seen[a.ID] = i
			}
		}
		if a.Provider != "" && !provider.Known(a.Provider) {
			errs = append(errs, d.Errorf(at+".provider", "unknown provider %q (known: %s)", a.Provider, strings.Join(provider.Kinds, ", ")))
		}
		if a.ID != "" && agent.ValidID(a.ID) {
			errs = append(errs, d.FieldErrors(at, a.Validate())...)
		}
	}
	errs = append(errs, c.Lattice.validate(d, c.errorf)...)
	errs = append(errs, c.latticeSecurityErrors()...)
	// Module sections validate themselves (their Validate methods).
	errs = append(errs, d.ValidateTree("mcp_servers", reflect.ValueOf(&c.MCPServers).Elem())...)
	errs = append(errs, d.ValidateTree("mcp_server", reflect.ValueOf(&c.MCPServer).Elem())...)
	errs = append(errs, d.ValidateTree("a2a", reflect.ValueOf(&c.A2A).Elem())...)
	errs = append(errs, d.ValidateTree("a2a_agents", reflect.ValueOf(&c.A2AAgents).Elem())...)
	errs = append(errs, d.ValidateTree("approval", reflect.ValueOf(&c.Approval).Elem())...)
	errs = append(errs, d.ValidateTree("webhooks", reflect.ValueOf(&c.Webhooks).Elem())...)
	errs = append(errs, d.ValidateTree("push", reflect.ValueOf(&c.Push).Elem())...)
	errs = append(errs, d.ValidateTree("cluster", reflect.ValueOf(&c.Cluster).Elem())...)
	errs = append(errs, d.ValidateTree("conversations", reflect.ValueOf(&c.Conversations).Elem())...)
	errs = append(errs, d.ValidateTree("telemetry", reflect.ValueOf(&c.Telemetry).Elem())...)
	if c.Conversations.Store == StoreNATS && c.Lattice.Backend != "nats" && !d.Failed("conversations.store") {
		errs = append(errs, d.Errorf("conversations.store", "nats needs lattice.backend: nats (the store lives in the lattice's JetStream)"))
	}
	return errors.Join(errs...)
}

// ErrRefuseUnauthenticated is returned by [Config.CheckListen] for a
// non-loopback address without a token.
var ErrRefuseUnauthenticated = errors.New("refusing to serve without authentication on a non-loopback address")

// CheckListen refuses a public listener without a token, unless
// server.allow_unauthenticated says so ([ServerConfig].AllowUnauthenticated;
// [IsLoopback] tells which addresses are public).
func (c *Config) CheckListen() error {
	s := c.Server
	if s.Authenticated() || s.AllowUnauthenticated || IsLoopback(s.Addr) {
		return nil
	}
	return fmt.Errorf("%w: server.addr is %s; set server.api_token (or AXOCOATL_API_TOKEN), listen on 127.0.0.1, or set server.allow_unauthenticated: true", ErrRefuseUnauthenticated, s.Addr)
}

// IsLoopback reports whether a listen address is on loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewLogger builds the logger the config asks for (log.level, log.format),
// writing to w.
func (c *Config) NewLogger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Log.Level))
	if c.Log.Level == "" {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

var secretType = reflect.TypeFor[secret.Secret]()

// Secrets returns every secret value ([secret.Secret]) in the config: the API token, model
// provider keys, MCP servers' env and headers, and whatever a section adds
// later (found by type, so new sections are covered). Modules that pass
// outside text along (MCP servers' stderr and errors) scrub them all, since
// a child process may know any of them.
func (c *Config) Secrets() []secret.Secret {
	var out []secret.Secret
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Value())
			}
		case reflect.String:
			if v.Type() == secretType && v.String() != "" {
				out = append(out, secret.Secret(v.String()))
			}
		}
	}
	walk(reflect.ValueOf(c).Elem())
	return out
}
