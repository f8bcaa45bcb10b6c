package boltstore_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/boltstore"
)

// cpuNow is the CPU time this process has used (user and system): on a
// machine shared with other work, the wall time of a phase measures the
// scheduler as much as the code, its CPU time the code alone.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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
// one Append apiece, their ids starting with prefix.
func prefill(b *testing.B, s conversation.Store, prefix string, n int) []string {
	b.Helper()
	var history []conversation.Message
	for range 99 {
		history = append(history, echoTurn()...)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d", prefix, i)
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
// on the echo model, against a one-shot run plus the store's own write of
// that turn alone (the Append of its two messages to another conversation
// of 99 turns). The goal: turn100 ≤ 1.2 × (oneshot + storewrite). Each
// iteration times the three one after the other, so that all three see
// the same load (fsync times on a shared disk wander by 3× between
// runs); turn100 and storewrite take conversations of their own,
// prefilled to 99 turns outside the timer, so that every measured turn is
// the 100th. Reported per iteration: oneshot-ns, turn100-ns,
// storewrite-ns and ratio (turn100 / (oneshot + storewrite)).
func BenchmarkTurn(b *testing.B) {
	for _, mode := range []struct {
		name   string
		noSync bool
	}{{"fsync", false}, {"nosync", true}} {
		b.Run(mode.name, func(b *testing.B) {
			s := openBench(b, mode.noSync)
			turnIDs := prefill(b, s, "t", b.N)
			writeIDs := prefill(b, s, "w", b.N)
			e := newEngine(b, s)
			var oneshot, turn100, write, oneshotCPU, turn100CPU, writeCPU time.Duration
			b.ResetTimer()
			for i := range b.N {
				t0, c0 := time.Now(), cpuNow()
				if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: benchInput}); err != nil {
					b.Fatal(err)
				}
				t1, c1 := time.Now(), cpuNow()
				if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: benchInput, ConversationID: turnIDs[i]}); err != nil {
					b.Fatal(err)
				}
				t2, c2 := time.Now(), cpuNow()
				if err := s.Append(ctx, writeIDs[i], echoTurn()); err != nil {
					b.Fatal(err)
				}
				t3, c3 := time.Now(), cpuNow()
				oneshot += t1.Sub(t0)
				turn100 += t2.Sub(t1)
				write += t3.Sub(t2)
				oneshotCPU += c1 - c0
				turn100CPU += c2 - c1
				writeCPU += c3 - c2
			}
			n := float64(b.N)
			b.ReportMetric(float64(oneshot.Nanoseconds())/n, "oneshot-ns")
			b.ReportMetric(float64(turn100.Nanoseconds())/n, "turn100-ns")
			b.ReportMetric(float64(write.Nanoseconds())/n, "storewrite-ns")
			b.ReportMetric(float64(turn100)/float64(oneshot+write), "ratio")
			b.ReportMetric(float64(turn100CPU)/float64(oneshotCPU+writeCPU), "cpu-ratio")
		})
	}
}

// appendWriters is how many conversations BenchmarkAppend16 writes at
// once.
const appendWriters = 16

// BenchmarkAppend16: 16 conversations appended to at once, the store's
// Append against raw bbolt Updates putting the same encoded bytes (the
// turn's two message records) under sequence keys in one bucket per
// conversation, on a file opened with the same options. Each iteration is
// one round of each, 16 writers at once: first 16 turns through the
// store, then 16 raw Updates, timed apart, so that both see the same
// load. Reported: store-ns and raw-ns per turn, and ratio (raw-ns /
// store-ns: the store's turns per second over raw's), and cpu-ratio, the
// same ratio of the process's CPU time in each phase. The goal: ratio ≥
// 0.8.
func BenchmarkAppend16(b *testing.B) {
	for _, mode := range []struct {
		name   string
		noSync bool
	}{{"fsync", false}, {"nosync", true}} {
		b.Run(mode.name, func(b *testing.B) {
			s := openBench(b, mode.noSync)
			for w := range appendWriters {
				if err := s.Create(ctx, conversation.Info{ID: fmt.Sprintf("c%d", w), AgentID: "a"}); err != nil {
					b.Fatal(err)
				}
			}
			db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{NoSync: mode.noSync, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			var encoded [][]byte
			for _, m := range echoTurn() {
				encoded = append(encoded, boltstore.EncodeMessage(m))
			}
			var seq [appendWriters]uint64
			var storeCPU, rawCPU time.Duration
			round := func(cpu *time.Duration, work func(w int) error) time.Duration {
				start, c0 := time.Now(), cpuNow()
				defer func() { *cpu += cpuNow() - c0 }()
				var wg sync.WaitGroup
				for w := range appendWriters {
					wg.Go(func() {
						if err := work(w); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				return time.Since(start)
			}
			var store, raw time.Duration
			b.ResetTimer()
			for range b.N {
				store += round(&storeCPU, func(w int) error { return s.Append(ctx, fmt.Sprintf("c%d", w), echoTurn()) })
				raw += round(&rawCPU, func(w int) error {
					return db.Update(func(tx *bolt.Tx) error {
						bk, err := tx.CreateBucketIfNotExists([]byte(fmt.Sprintf("c%d", w)))
						if err != nil {
							return err
						}
						for _, v := range encoded {
							var k [8]byte
							binary.BigEndian.PutUint64(k[:], seq[w])
							seq[w]++
							if err := bk.Put(k[:], v); err != nil {
								return err
							}
						}
						return nil
					})
				})
			}
			turns := float64(b.N * appendWriters)
			b.ReportMetric(float64(store.Nanoseconds())/turns, "store-ns")
			b.ReportMetric(float64(raw.Nanoseconds())/turns, "raw-ns")
			b.ReportMetric(float64(raw)/float64(store), "ratio")
			b.ReportMetric(float64(rawCPU)/float64(storeCPU), "cpu-ratio")
		})
	}
}
