// Command axocoatl is the turnkey daemon: it loads a YAML
// config (or the built-in default: one echo agent on 127.0.0.1:8080), boots
// the Engine with its modules and serves the HTTP API, the WebSocket event
// stream, metrics and the dashboard.
//
//	axocoatl [serve] [--config PATH] [--addr HOST:PORT]
//	axocoatl validate [--config PATH]
//	axocoatl doctor [--config PATH] [--send-test]
//	axocoatl mcp serve [--config PATH] [--http ADDR]
//	axocoatl version
//
// Exit codes: 0 ok, 1 failure (bad config, failed check, server error),
// 2 usage error.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/axocoatl/axocoatl-go/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal starts the graceful shutdown, a second one
	// gets the default behaviour: the process ends at once.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// cli is the process's streams and environment, passed in so commands
// are testable in-process.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// lookup reads the environment. Zero: os.LookupEnv.
	lookup func(string) (string, bool)
	// hooks observe `serve` (tests, benchmarks).
	hooks serveHooks
}

// command is one subcommand. Subcommands with their own subcommands (mcp)
// dispatch on args themselves.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, c *cli, args []string) int
}

func commands() []command {
	return []command{
		{"serve", "run the daemon (the default)", runServe},
		{"validate", "check the config and exit (1 on error, with file:line)", runValidate},
		{"doctor", "check config and providers; list where egress goes", runDoctor},
		{"mcp", "mcp serve: speak MCP over stdio (stdout carries only protocol); mcp login <server>: OAuth login", runMCP},
		{"version", "print version, commit and Go version", runVersion},
	}
}

func run(ctx context.Context, args []string, c *cli) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]) {
		return runServe(ctx, c, args)
	}
	if isHelp(args[0]) || args[0] == "help" {
		usage(c.stdout)
		return exitOK
	}
	for _, cmd := range commands() {
		if cmd.name == args[0] {
			return cmd.run(ctx, c, args[1:])
		}
	}
	fmt.Fprintf(c.stderr, "axocoatl: unknown command %q\n\n", args[0])
	usage(c.stderr)
	return exitUsage
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: axocoatl [command] [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintln(w, "\nRun 'axocoatl <command> -h' for a command's flags.")
}

// configFlags are the flags every config-reading command takes.
type configFlags struct {
	path string
	addr string
}

// newFlags returns a flag set writing its usage to stderr. withAddr adds
// --addr (serve only).
func newFlags(c *cli, name, synopsis string, cf *configFlags, withAddr bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: axocoatl %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	fs.StringVar(&cf.path, "config", "", "config file (default: $AXOCOATL_CONFIG, ./axocoatl.yaml, else the built-in default)")
	if withAddr {
		fs.StringVar(&cf.addr, "addr", "", "listen address host:port, overriding the config and $AXOCOATL_ADDR")
	}
	return fs
}

// parseFlags parses args; ok is false with the exit code to return.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "axocoatl %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return 0, true
}

//go:embed default.yaml
var defaultConfigYAML []byte

// load reads the config for a command, printing errors one per line.
func (c *cli) load(ctx context.Context, cf configFlags) (*config.Config, bool) {
	cfg, err := config.Load(ctx, config.LoadOptions{Path: cf.path, Addr: cf.addr, Lookup: c.lookup, Default: defaultConfigYAML})
	if err != nil {
		printErrors(c.stderr, err)
		return nil, false
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(c.stderr, "warning:", w)
	}
	return cfg, true
}

// printErrors writes each joined error on its own line.
func printErrors(w io.Writer, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			printErrors(w, e)
		}
		return
	}
	fmt.Fprintln(w, err)
}

func runServe(ctx context.Context, c *cli, args []string) int {
	var cf configFlags
	fs := newFlags(c, "serve", "[serve] [--config PATH] [--addr HOST:PORT]", &cf, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, ok := c.load(ctx, cf)
	if !ok {
		return exitFail
	}
	log := cfg.NewLogger(c.stderr) // warnings were printed by load
	if err := serve(ctx, cfg, log, c.hooks); err != nil {
		printErrors(c.stderr, err)
		return exitFail
	}
	return exitOK
}

func runValidate(ctx context.Context, c *cli, args []string) int {
	var cf configFlags
	fs := newFlags(c, "validate", "validate [--config PATH]", &cf, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, ok := c.load(ctx, cf)
	if !ok {
		return exitFail
	}
	if err := cfg.CheckListen(); err != nil {
		fmt.Fprintln(c.stderr, cfg.Errorf("server.addr", "%v", err))
		return exitFail
	}
	fmt.Fprintf(c.stdout, "%s: ok (%d agents)\n", cfg.Source, len(cfg.Agents))
	return exitOK
}

func runVersion(_ context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	version, commit, goVersion := buildVersion()
	fmt.Fprintf(c.stdout, "axocoatl %s\ncommit %s\n%s\n", version, commit, goVersion)
	return exitOK
}

// buildVersion reads the version from the module build info (set by
// `go install …@vX`) and the VCS stamp of a source build.
func buildVersion() (version, commit, goVersion string) {
	version, commit, goVersion = "(devel)", "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	goVersion = bi.GoVersion
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		commit += " (modified)"
	}
	return
}

func runDoctor(ctx context.Context, c *cli, args []string) int {
	var cf configFlags
	fs := newFlags(c, "doctor", "doctor [--config PATH] [--send-test]", &cf, false)
	sendTest := fs.Bool("send-test", false, "send each webhook one signed test delivery (event_type WebhookTest); fail those not answering 2xx")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, ok := c.load(ctx, cf)
	if !ok {
		fmt.Fprintln(c.stdout, "FAIL config: see the errors above")
		return exitFail
	}
	r := cfg.DoctorWith(ctx, config.DoctorOptions{SendTest: *sendTest})
	r.Print(c.stdout)
	if r.Failed() {
		return exitFail
	}
	return exitOK
}
