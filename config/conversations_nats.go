package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/natskv"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// ConversationsConfig is `conversations:`: where agents' conversations are
// kept and their bounds. (Minimal here: the nats store's half; the bbolt
// store, the daemon's default off NATS, joins this section.)
type ConversationsConfig struct {
	// Store: memory | nats. Zero: nats when lattice.backend is nats (a
	// conversation started through one daemon continues through another),
	// else memory.
	Store ConversationStore `yaml:"store"`
	// Limits bound the store ([conversation.Limits]; zero fields: their
	// defaults).
	Limits conversation.Limits `yaml:",inline"`
	// NATS tunes the nats store: `conversations.nats:`.
	NATS NATSConversations `yaml:"nats"`
}

// NATSConversations is `conversations.nats:`: the JetStream KV bucket of
// the nats store ([natskv.Config]). Created if missing, updated to these
// settings if it exists.
type NATSConversations struct {
	// Bucket shared by the daemons. Zero: axocoatl_conversations.
	Bucket string `yaml:"bucket"`
	// Replicas of the bucket (a JetStream cluster of so many servers).
	// Zero: 1.
	Replicas int `yaml:"replicas"`
	// MaxBucketBytes bounds what the bucket holds, enforced by JetStream.
	// Zero: twice max_total_bytes plus 64 MiB; -1: no bound.
	MaxBucketBytes int64 `yaml:"max_bucket_bytes"`
	// LeaseRenew: how often a running turn renews its conversation's
	// lease; a daemon that dies mid-turn holds it three times that. Zero:
	// 5s.
	LeaseRenew time.Duration `yaml:"lease_renew"`
}

// ConversationStore is conversations.store.
type ConversationStore string

// Validate checks the name.
func (s ConversationStore) Validate() error {
	switch s {
	case "", "memory", "nats":
		return nil
	}
	return fmt.Errorf("%q: memory or nats", string(s))
}

// Validate checks the section without connecting.
func (n NATSConversations) Validate() error {
	if err := n.config().Validate(); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "natskv: "))
	}
	return nil
}

func (n NATSConversations) config() natskv.Config {
	return natskv.Config{Bucket: n.Bucket, Replicas: n.Replicas, MaxBucketBytes: n.MaxBucketBytes, LeaseRenew: n.LeaseRenew}
}

// conversationStore opens the store conversations.store names, on bus
// (nil: the in-memory lattice); nil: the Engine's own in-memory store.
func (c *Config) conversationStore(ctx context.Context, bus lattice.Bus, log *slog.Logger) (conversation.Store, error) {
	nb, onNATS := bus.(*latticenats.Bus)
	switch c.Conversations.Store {
	case "nats":
		if !onNATS {
			return nil, c.errorf("conversations.store", "nats needs lattice.backend: nats")
		}
	case "":
		if !onNATS {
			return nil, nil
		}
	default: // memory
		return conversation.NewMemory(c.Conversations.Limits), nil
	}
	s, err := natsConversations(ctx, nb, c.Conversations.NATS, c.Conversations.Limits, log)
	if errors.Is(err, natskv.ErrNoJetStream) && c.Conversations.Store == "" {
		// The default on NATS, on a server without JetStream (the
		// cluster runs without it): each daemon keeps its own.
		log.Warn("conversations are kept in this daemon's memory, not shared by the cluster: the NATS server has no JetStream (run it with -js, or set conversations.store)")
		return conversation.NewMemory(c.Conversations.Limits), nil
	}
	return s, err
}

// natsConversations opens the nats store on the lattice's connection.
func natsConversations(ctx context.Context, nb *latticenats.Bus, n NATSConversations, limits conversation.Limits, log *slog.Logger) (conversation.Store, error) {
	cfg := n.config()
	cfg.Conn, cfg.Limits, cfg.Logger = nb.Conn(), limits, log
	s, err := natskv.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("conversations: %w", err)
	}
	return s, nil
}
