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
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

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
