package egress

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// store is what outlives the process for localBackend: each webhook's
// pending deliveries (queued or in flight) and its dead letters. The
// backend keeps its bounded in-memory queue and asks the store only to
// remember.
//
// add is synchronous (a delivery is durable before it is queued); change
// is applied later, in order, in batches: a crash may lose the last
// changes (an attempt count, a removal after success), which only means
// a delivery is sent again with its delivery_id, never that one is lost.
type store interface {
	// load returns what a webhook left behind, each list in key order.
	load(webhook string) (pending, dead []*delivery, maxKey uint64, err error)
	// add stores new pending deliveries in one transaction.
	add(webhook string, ds []*delivery) error
	// change applies a group of edits together, asynchronously.
	change(edits ...edit)
	// close applies the changes still waiting and releases the store.
	close() error
}

// Where an edit applies.
const (
	pendingBucket = "pending"
	deadBucket    = "dead"
)

// edit puts (val != nil) or deletes one record.
type edit struct {
	webhook string
	bucket  string
	key     uint64
	val     []byte
}

func putEdit(webhook, bucket string, key uint64, r record) edit {
	v, err := json.Marshal(r)
	if err != nil { // a record always marshals; keep the old value if not
		return edit{}
	}
	return edit{webhook: webhook, bucket: bucket, key: key, val: v}
}

func delEdit(webhook, bucket string, key uint64) edit {
	return edit{webhook: webhook, bucket: bucket, key: key}
}

// memStore remembers nothing: without a data dir, deliveries live in the
// hooks' queues only.
type memStore struct{}

func (memStore) load(string) ([]*delivery, []*delivery, uint64, error) { return nil, nil, 0, nil }
func (memStore) add(string, []*delivery) error                         { return nil }
func (memStore) change(...edit)                                        {}
func (memStore) close() error                                          { return nil }

// boltStore keeps deliveries in DataDir/egress.db (bbolt): one top-level
// bucket per webhook, with "pending" and "dead" buckets keyed by the
// delivery's 8-byte big-endian key. One goroutine (run) applies changes,
// many at a time, so that a busy webhook costs one fsync per batch.
type boltStore struct {
	db    *bolt.DB
	log   *slog.Logger
	edits chan []edit
	done  chan struct{}
}

// DBFile is the store's file name inside Config.DataDir.
const DBFile = "egress.db"

// editBuffer bounds the changes waiting for the writer; senders block
// beyond it (back-pressure on the workers, not unbounded memory).
const editBuffer = 4096

func openBolt(dir string, log *slog.Logger) (*boltStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress: data dir: %w", err)
	}
	db, err := bolt.Open(filepath.Join(dir, DBFile), 0o600, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("egress: open %s: %w (is another process using this data dir?)", filepath.Join(dir, DBFile), err)
	}
	if err != nil {
		return nil, fmt.Errorf("egress: open %s: %w", filepath.Join(dir, DBFile), err)
	}
	return &boltStore{db: db, log: log, edits: make(chan []edit, editBuffer), done: make(chan struct{})}, nil
}

func key8(k uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], k)
	return b[:]
}

func hookBucket(name string) []byte { return []byte("webhook/" + name) }

func (s *boltStore) load(webhook string) (pending, dead []*delivery, maxKey uint64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(hookBucket(webhook))
		if root == nil {
			return nil
		}
		read := func(name string, out *[]*delivery) error {
			b := root.Bucket([]byte(name))
			if b == nil {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				var r record
				if err := json.Unmarshal(v, &r); err != nil || len(k) != 8 {
					s.log.Warn("webhook store: unreadable record skipped", "webhook", webhook, "bucket", name)
					return nil
				}
				key := binary.BigEndian.Uint64(k)
				maxKey = max(maxKey, key)
				// The record's Body aliases the mmap: copy it.
				r.Body = append([]byte(nil), r.Body...)
				*out = append(*out, r.delivery(key))
				return nil
			})
		}
		if err := read(pendingBucket, &pending); err != nil {
			return err
		}
		return read(deadBucket, &dead)
	})
	return pending, dead, maxKey, err
}

// orphans counts the pending deliveries of stored webhooks that are not
// in configured: left by an earlier configuration, kept but not sent.
func (s *boltStore) orphans(configured map[string]*hook) map[string]int {
	out := map[string]int{}
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, root *bolt.Bucket) error {
			hook, ok := strings.CutPrefix(string(name), "webhook/")
			if !ok || configured[hook] != nil {
				return nil
			}
			if b := root.Bucket([]byte(pendingBucket)); b != nil {
				out[hook] = b.Stats().KeyN
			}
			return nil
		})
	})
	return out
}

func (s *boltStore) add(webhook string, ds []*delivery) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, webhook, pendingBucket)
		if err != nil {
			return err
		}
		for _, d := range ds {
			v, err := json.Marshal(d.record())
			if err != nil {
				return err
			}
			if err := b.Put(key8(d.key), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func bucket(tx *bolt.Tx, webhook, name string) (*bolt.Bucket, error) {
	root, err := tx.CreateBucketIfNotExists(hookBucket(webhook))
	if err != nil {
		return nil, err
	}
	return root.CreateBucketIfNotExists([]byte(name))
}

func (s *boltStore) change(edits ...edit) { s.edits <- edits }

// run applies changes until close; it is the store's one goroutine.
func (s *boltStore) run() {
	defer close(s.done)
	for group := range s.edits {
		batch := [][]edit{group}
		n := len(group)
	more:
		for n < 2048 {
			select {
			case g, ok := <-s.edits:
				if !ok {
					break more
				}
				batch = append(batch, g)
				n += len(g)
			default:
				break more
			}
		}
		err := s.db.Update(func(tx *bolt.Tx) error {
			for _, g := range batch {
				for _, e := range g {
					if e.webhook == "" {
						continue
					}
					b, err := bucket(tx, e.webhook, e.bucket)
					if err != nil {
						return err
					}
					if e.val == nil {
						err = b.Delete(key8(e.key))
					} else {
						err = b.Put(key8(e.key), e.val)
					}
					if err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			s.log.Error("webhook store: write failed; deliveries continue in memory", "changes", n, "error", err)
		}
	}
}

func (s *boltStore) close() error {
	close(s.edits)
	<-s.done
	return s.db.Close()
}
