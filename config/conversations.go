package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/boltstore"
	"github.com/axocoatl/axocoatl-go/conversation/natskv"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// ConversationsConfig is the `conversations:` section: where agents'
// conversations are kept ([axocoatl.Options].Conversations) and the bounds
// of that store, keys as in [conversation.Limits].
type ConversationsConfig struct {
	// Store: "bolt" (conversations.db in server.data_dir), "memory"
	// (nothing on disk, gone at exit) or "nats" (JetStream KV, shared by
	// the daemons of one NATS lattice). Zero: "nats" when lattice.backend
	// is nats, else "bolt".
	Store string `yaml:"store"`
	// Limits bound the store; zero fields are their defaults, negative
	// ones no bound.
	conversation.Limits `yaml:",inline"`
	// NATS tunes the nats store: `conversations.nats:`.
	NATS NATSConversations `yaml:"nats"`
}

// Stores of [ConversationsConfig].Store.
const (
	StoreBolt   = "bolt"
	StoreMemory = "memory"
	StoreNATS   = "nats"
)

// Smallest values of the bounds that make sense: a smaller max_bytes holds
// no turn, a shorter idle_ttl ends a conversation between two turns.
const (
	minConversationBytes = 4 << 10
	minIdleTTL           = time.Minute
)

// Validate checks the section; its errors are [axocoatl.ConfigError]s by
// key.
func (c ConversationsConfig) Validate() error {
	var errs []error
	switch c.Store {
	case "", StoreBolt, StoreMemory, StoreNATS:
	default:
		errs = append(errs, cfgerr.Errorf("store", "%q is unknown (bolt | memory | nats; empty: nats on a NATS lattice, else bolt)", c.Store))
	}
	if c.MaxBytes > 0 && c.MaxBytes < minConversationBytes {
		errs = append(errs, cfgerr.Errorf("max_bytes", "%d holds no real turn: use at least %d (zero: 8 MiB; negative: no bound)", c.MaxBytes, minConversationBytes))
	}
	if c.MaxTotalBytes > 0 && c.MaxTotalBytes < minConversationBytes {
		errs = append(errs, cfgerr.Errorf("max_total_bytes", "%d holds no real turn: use at least %d (zero: 1 GiB; negative: no bound)", c.MaxTotalBytes, minConversationBytes))
	}
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, cfgerr.Errorf("nats", "%v", err))
	}
	if c.IdleTTL > 0 && c.IdleTTL < minIdleTTL {
		errs = append(errs, cfgerr.Errorf("idle_ttl", "%s would end conversations between two turns: use at least %s (zero: 30 days; negative: never)", c.IdleTTL, minIdleTTL))
	}
	return errors.Join(errs...)
}

// ConversationStore is the store [ConversationsConfig].Store names for
// this config: "nats" or "bolt" when it is empty.
func (c *Config) ConversationStore() string {
	switch {
	case c.Conversations.Store != "":
		return c.Conversations.Store
	case c.Lattice.Backend == "nats":
		return StoreNATS
	}
	return StoreBolt
}

// ConversationsFile is where the bolt store keeps conversations:
// server.data_dir/conversations.db.
func (c *Config) ConversationsFile() string {
	return filepath.Join(c.Server.DataDir, boltstore.FileName)
}

// sharedOpenTimeout is how long a process sharing the data dir (`mcp
// serve`) waits for the holder of conversations.db at each operation.
const sharedOpenTimeout = 2 * time.Second

// openConversations opens the store of the conversations section, and
// says where it is (for the startup log and doctor). The caller closes
// the store after the Engine.
func (c *Config) openConversations(ctx context.Context, bus lattice.Bus, opts BuildOptions, log *slog.Logger) (conversation.Store, string, error) {
	limits := c.Conversations.Limits
	switch kind := c.ConversationStore(); kind {
	case StoreMemory:
		return conversation.NewMemory(limits), "memory (gone at exit)", nil
	case StoreNATS:
		nb, onNATS := bus.(*latticenats.Bus)
		if !onNATS {
			return nil, "", c.errorf("conversations.store", "nats needs lattice.backend: nats (the store lives in the lattice's JetStream)")
		}
		s, err := natsConversations(ctx, nb, c.Conversations.NATS, limits, log)
		if errors.Is(err, natskv.ErrNoJetStream) && c.Conversations.Store == "" {
			// The default on NATS, on a server without JetStream (the
			// cluster runs without it): each daemon keeps its own.
			log.Warn("conversations are kept in this daemon's memory, not shared by the cluster and gone at exit: the NATS server has no JetStream (run it with -js, or set conversations.store)")
			return conversation.NewMemory(limits), "memory (the NATS server has no JetStream)", nil
		}
		if err != nil {
			return nil, "", err
		}
		bucket := c.Conversations.NATS.Bucket
		if bucket == "" {
			bucket = natskv.DefaultBucket
		}
		return s, "nats JetStream KV bucket " + bucket, nil
	default: // StoreBolt
		path := c.ConversationsFile()
		if opts.SharedDataDir {
			return c.openSharedBolt(path, limits, log)
		}
		s, err := boltstore.Open(path, boltstore.Options{Limits: limits})
		if errors.Is(err, boltstore.ErrInUse) {
			return nil, "", fmt.Errorf("conversations: %w: another process holds %s; give this daemon its own server.data_dir (or AXOCOATL_DATA_DIR), or set conversations.store: memory", err, path)
		}
		if err != nil {
			return nil, "", fmt.Errorf("conversations: %w", err)
		}
		return s, "bolt " + path, nil
	}
}

// openSharedBolt is the bolt store of a process that shares the data dir
// with its holder (`mcp serve` beside the daemon): the file is opened for
// each operation only ([boltstore.OpenShared]), so that a daemon started
// later can take it. When the daemon holds it already, this process keeps
// its conversations in memory, says so, and says how to share the
// daemon's: through its /mcp endpoint.
func (c *Config) openSharedBolt(path string, limits conversation.Limits, log *slog.Logger) (conversation.Store, string, error) {
	s, err := boltstore.OpenShared(path, boltstore.Options{Limits: limits, OpenTimeout: sharedOpenTimeout})
	if errors.Is(err, boltstore.ErrInUse) {
		log.Warn("conversations of this process are kept in memory: they are gone when it exits and the daemon does not see them; "+
			"another process (the daemon) holds the conversation store. To keep them in the daemon's store, connect the MCP client to the daemon's /mcp endpoint (streamable HTTP) instead of `mcp serve`",
			"file", path)
		return conversation.NewMemory(limits), "memory (" + path + " is held by another process)", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("conversations: %w", err)
	}
	return s, "bolt " + path + " (opened for each operation: shared with a daemon on this data dir)", nil
}

// conversationsReport is doctor's line about the conversation store: what
// it is and where, without opening it (a running daemon holds it).
func (c *Config) conversationsReport(r *Report) {
	switch kind := c.ConversationStore(); kind {
	case StoreMemory:
		r.ok("conversations", "in memory: gone when the process exits")
	case StoreNATS:
		r.ok("conversations", "NATS JetStream KV on the lattice: shared by every daemon on it")
	default:
		path := c.ConversationsFile()
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			r.ok("conversations", "bolt "+path+" (created at first start)")
		case err != nil:
			r.fail("conversations", fmt.Sprintf("bolt %s: %v", path, err))
		default:
			r.ok("conversations", fmt.Sprintf("bolt %s (%.1f MB; the file does not shrink when conversations are deleted)", path, float64(fi.Size())/1e6))
		}
	}
}
