package boltstore_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/boltstore"
)

const benchInput = "what did we decide about the deploy window on friday?"

// echoTurn is what one turn of the echo agent on benchInput records.
func echoTurn() []conversation.Message {
	at := time.Now()
	return []conversation.Message{
		{Role: agent.RoleUser, Content: benchInput, TaskID: "01JDXXXXXXXXXXXXXXXXXXXXXX", At: at},
		{Role: agent.RoleAssistant, Content: benchInput, TaskID: "01JDXXXXXXXXXXXXXXXXXXXXXX", At: at},
	}
}

// prefill makes n conversations of agent a holding 99 echo turns each,
// one Append apiece.
func prefill(b *testing.B, s conversation.Store, n int) []string {
	b.Helper()
	var history []conversation.Message
	for range 99 {
		history = append(history, echoTurn()...)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i)
		if err := s.Create(ctx, conversation.Info{ID: ids[i], AgentID: "a"}); err != nil {
			b.Fatal(err)
		}
		if err := s.Append(ctx, ids[i], history); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

func openBench(b *testing.B, noSync bool) *boltstore.Store {
	b.Helper()
	s, err := boltstore.Open(filepath.Join(b.TempDir(), boltstore.FileName), boltstore.Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkTurn: turn 100 of a conversation through Engine.ExecuteRequest
// on the echo model (turn100), against a one-shot run (oneshot) plus the
// store's own write of that turn alone (storewrite: the Append of its two
// messages to a conversation of 99 turns). The goal: turn100 ≤ 1.2 ×
// (oneshot + storewrite). Each iteration of turn100 and storewrite uses a
// conversation of its own, prefilled to 99 turns outside the timer, so
// that every measured turn is the 100th.
func BenchmarkTurn(b *testing.B) {
	for _, mode := range []struct {
		name   string
		noSync bool
	}{{"fsync", false}, {"nosync", true}} {
		b.Run(mode.name+"/oneshot", func(b *testing.B) {
			e := newEngine(b, openBench(b, mode.noSync))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: benchInput}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/turn100", func(b *testing.B) {
			s := openBench(b, mode.noSync)
			ids := prefill(b, s, b.N)
			e := newEngine(b, s)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: benchInput, ConversationID: ids[i]}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/storewrite", func(b *testing.B) {
			s := openBench(b, mode.noSync)
			ids := prefill(b, s, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := s.Append(ctx, ids[i], echoTurn()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// appendWriters is how many conversations BenchmarkAppend16 writes at
// once.
const appendWriters = 16

// BenchmarkAppend16: 16 conversations appended to at once, ns per turn:
// the store's Append (store) against raw bbolt Updates putting the same
// encoded bytes (the turn's two messages, JSON) under sequence keys in one
// bucket per conversation (raw), on a file opened with the same options.
// The goal: store ≥ 0.8 × raw in turns per second, i.e. its ns/op ≤ 1.25
// × raw's.
func BenchmarkAppend16(b *testing.B) {
	for _, mode := range []struct {
		name   string
		noSync bool
	}{{"fsync", false}, {"nosync", true}} {
		split := func(n int, work func(w, turns int)) {
			var wg sync.WaitGroup
			for w := range appendWriters {
				turns := n / appendWriters
				if w < n%appendWriters {
					turns++
				}
				wg.Go(func() { work(w, turns) })
			}
			wg.Wait()
		}
		b.Run(mode.name+"/store", func(b *testing.B) {
			s := openBench(b, mode.noSync)
			for w := range appendWriters {
				if err := s.Create(ctx, conversation.Info{ID: fmt.Sprintf("c%d", w), AgentID: "a"}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			split(b.N, func(w, turns int) {
				id := fmt.Sprintf("c%d", w)
				for range turns {
					if err := s.Append(ctx, id, echoTurn()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(mode.name+"/raw", func(b *testing.B) {
			db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{NoSync: mode.noSync, FreelistType: bolt.FreelistMapType})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			var encoded [][]byte
			for _, m := range echoTurn() {
				v, _ := json.Marshal(m)
				encoded = append(encoded, v)
			}
			b.ResetTimer()
			split(b.N, func(w, turns int) {
				name := []byte(fmt.Sprintf("c%d", w))
				var seq uint64
				for range turns {
					err := db.Update(func(tx *bolt.Tx) error {
						bk, err := tx.CreateBucketIfNotExists(name)
						if err != nil {
							return err
						}
						for _, v := range encoded {
							var k [8]byte
							binary.BigEndian.PutUint64(k[:], seq)
							seq++
							if err := bk.Put(k[:], v); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
