package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/examples/daemon/internal/yamlconf"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Config is the whole config file. Each module's section is an inline
// struct declared in that module's wiring file (mcpclient.go, …), so a
// module adds its keys without touching this file.
type Config struct {
	Server    ServerConfig     `yaml:"server"`
	Log       LogConfig        `yaml:"log"`
	Providers provider.Configs `yaml:"providers"`
	Agents    []agent.Spec     `yaml:"agents"`
	Lattice   LatticeConfig    `yaml:"lattice"`

	MCPClientSection `yaml:",inline"` // mcpclient.go: mcp_servers
	MCPServerSection `yaml:",inline"` // mcpserver.go
	A2ASection       `yaml:",inline"` // a2a.go

	// Source is where the config came from: a path, or "<built-in>".
	Source string `yaml:"-"`
	// Warnings found while loading (unknown top-level sections).
	Warnings []string `yaml:"-"`
	doc      *yamlconf.Doc
	// publicURLSet records that server.public_url came from the file, so
	// serve does not replace it with the bound address.
	publicURLSet bool
	// overrides maps a key set from the environment or a flag to that
	// variable or flag, so an error about its value blames the right place.
	overrides map[string]string
}

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
	// AllowUnauthenticated permits a non-loopback Addr without APIToken.
	// Zero: false, such a daemon refuses to start.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated"`
	// AllowedOrigins are extra browser origins allowed on the WebSocket,
	// as host patterns ("app.example.com", "*.example.com") or
	// "scheme://host". Zero: only pages served from this host.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// RequestTimeout bounds one API request (an execute waits at most
	// this long, then answers 504). Zero: 5m.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// BodyTimeout bounds reading one request body. Zero: 30s.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// ShutdownGrace is how long in-flight requests and runs may take to
	// finish after SIGINT/SIGTERM. Zero: 30s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// DataDir holds state that outlives a run (remembered approvals).
	// Zero: ./data.
	DataDir string `yaml:"data_dir"`
}

// Defaults of the server section.
const (
	DefaultAddr           = "127.0.0.1:8080"
	DefaultRequestTimeout = 5 * time.Minute
	DefaultShutdownGrace  = 30 * time.Second
	DefaultDataDir        = "./data"
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
		s.BodyTimeout = DefaultBodyReadTimeout
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
}

// DefaultNATSURL is used when lattice.nats_url is empty.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// validate checks the lattice section; errors name their key.
func (l LatticeConfig) validate(d *yamlconf.Doc) []error {
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
				errs = append(errs, d.Errorf("lattice.nats_url", "want nats://host:port (comma-separated for several)"))
				break
			}
		}
	}
	if l.Prefix != "" && !natsToken.MatchString(l.Prefix) {
		errs = append(errs, d.Errorf("lattice.prefix", "%q must be letters, digits, _ and - (dots allowed between them)", l.Prefix))
	}
	return errs
}

var natsToken = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

//go:embed default.yaml
var defaultConfigYAML []byte

const builtinSource = "<built-in>"

// envOverrides are the AXOCOATL_* variables; they win over the file.
type envOverrides struct {
	Config    *string        `env:"AXOCOATL_CONFIG"`
	Addr      *string        `env:"AXOCOATL_ADDR"`
	APIToken  *secret.Secret `env:"AXOCOATL_API_TOKEN"`
	DataDir   *string        `env:"AXOCOATL_DATA_DIR"`
	LogLevel  *string        `env:"AXOCOATL_LOG_LEVEL"`
	LogFormat *string        `env:"AXOCOATL_LOG_FORMAT"`
}

// loadOptions say where a config comes from. Zero fields: the process's.
type loadOptions struct {
	Path   string                      // --config; zero: $AXOCOATL_CONFIG, ./axocoatl.yaml, built-in
	Addr   string                      // --addr; zero: from env or file
	Lookup func(string) (string, bool) // environment; zero: os.LookupEnv
}

// loadConfig finds, parses, expands, overrides and validates the config.
// Every error names the file, line and key; none contains a secret.
func loadConfig(ctx context.Context, opts loadOptions) (*Config, error) {
	lookup := opts.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var env envOverrides
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{
		Target:        &env,
		Lookuper:      envconfig.LookuperFunc(lookup),
		DefaultNoInit: true,
	}); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}

	path := opts.Path
	if path == "" && env.Config != nil {
		path = *env.Config // empty: keep looking
	}
	data, source := defaultConfigYAML, builtinSource
	switch {
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		data, source = b, path
	default:
		if b, err := os.ReadFile("axocoatl.yaml"); err == nil {
			data, source = b, "axocoatl.yaml"
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	return parseConfig(source, data, lookup, env, opts.Addr)
}

func parseConfig(source string, data []byte, lookup yamlconf.Lookup, env envOverrides, addr string) (*Config, error) {
	doc, err := yamlconf.Parse(source, data)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Source: source, doc: doc}
	cfg.Warnings, err = doc.Decode(cfg, lookup)
	if err != nil {
		return nil, err
	}
	// An empty variable is treated as unset: AXOCOATL_API_TOKEN= must not
	// silently switch off the file's token.
	cfg.overrides = map[string]string{}
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
	set(&cfg.Server.DataDir, env.DataDir, "server.data_dir", "AXOCOATL_DATA_DIR")
	set(&cfg.Log.Level, env.LogLevel, "log.level", "AXOCOATL_LOG_LEVEL")
	set(&cfg.Log.Format, env.LogFormat, "log.format", "AXOCOATL_LOG_FORMAT")
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.publicURLSet = cfg.Server.PublicURL != ""
	cfg.Server = cfg.Server.WithDefaults()
	return cfg, nil
}

// errorf reports a bad value at key: at the file's line, or, when the
// value came from the environment or a flag, naming that instead.
func (c *Config) errorf(key, format string, args ...any) error {
	if source, ok := c.overrides[key]; ok {
		return fmt.Errorf("%s: %s", source, fmt.Sprintf(format, args...))
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
	}
	for i, p := range c.Server.AllowedOrigins {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			errs = append(errs, d.Errorf(fmt.Sprintf("server.allowed_origins[%d]", i), "%q is not a valid host pattern", p))
		}
	}
	if c.Server.RequestTimeout < 0 {
		errs = append(errs, d.Errorf("server.request_timeout", "must not be negative"))
	}
	if c.Server.BodyTimeout < 0 {
		errs = append(errs, d.Errorf("server.body_timeout", "must not be negative"))
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
		if err := pc.Validate(); err != nil {
			// provider.Config.Validate starts its message with the key.
			key, msg, ok := strings.Cut(err.Error(), ": ")
			if !ok || strings.ContainsAny(key, " \"") {
				key, msg = "", err.Error()
			}
			errs = append(errs, d.Errorf(strings.TrimSuffix("providers."+kind+"."+key, "."), "%s", msg))
		}
	}
	if len(c.Agents) == 0 {
		errs = append(errs, d.Errorf("agents", "at least one agent is required"))
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
			if err := a.Validate(); err != nil {
				key, msg := agentErrorKey(at, err.Error())
				errs = append(errs, d.Errorf(key, "%s", msg))
			}
		}
	}
	errs = append(errs, c.Lattice.validate(d)...)
	// Module sections validate themselves (their Validate methods).
	for _, section := range []any{&c.MCPClientSection, &c.MCPServerSection, &c.A2ASection} {
		errs = append(errs, d.ValidateTree("", reflect.ValueOf(section).Elem())...)
	}
	return errors.Join(errs...)
}

// agentErrorKey attributes an agent.Spec.Validate message that starts
// with a field's name ("max_iterations must …", "tools: bad glob …") to
// that field's key, so the error has the field's line.
func agentErrorKey(at, msg string) (key, rest string) {
	for _, f := range []string{"max_iterations", "timeout", "tools"} {
		if r, ok := strings.CutPrefix(msg, f); ok && (strings.HasPrefix(r, " ") || strings.HasPrefix(r, ":")) {
			return at + "." + f, strings.TrimSpace(strings.TrimPrefix(r, ":"))
		}
	}
	return at, msg
}

// errRefuseUnauthenticated is returned when serving on a non-loopback
// address without a token.
var errRefuseUnauthenticated = errors.New("refusing to serve without authentication on a non-loopback address")

// checkListen refuses a public listener without a token.
func (c *Config) checkListen() error {
	s := c.Server
	if !s.APIToken.IsZero() || s.AllowUnauthenticated || isLoopback(s.Addr) {
		return nil
	}
	return fmt.Errorf("%w: server.addr is %s; set server.api_token (or AXOCOATL_API_TOKEN), listen on 127.0.0.1, or set server.allow_unauthenticated: true", errRefuseUnauthenticated, s.Addr)
}

func isLoopback(addr string) bool {
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

// newLogger builds the logger the config asks for, writing to w.
func (c *Config) newLogger(w io.Writer) *slog.Logger {
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

// secrets returns every secret value in the config: the API token, model
// provider keys, MCP servers' env and headers, and whatever a section adds
// later. Modules that pass outside text along (MCP servers' stderr and
// errors) scrub them all, since a child process may know any of them.
func (c *Config) secrets() []secret.Secret {
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
