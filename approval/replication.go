package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// EventVerdict is the lattice event that carries a verdict to the Module
// holding the approval (payload: approval_id, decision, remember,
// resolved_by, verdict_id, from). Modules publish it only for approvals
// another Engine holds; the holder answers with ApprovalResolved, whose
// verdict_id names the verdict that won.
const EventVerdict = "ApprovalVerdict"

// EventSync and EventPending let a Module that joins a shared lattice learn
// the approvals already pending elsewhere: it publishes EventSync (payload:
// from) once subscribed, and every other Module answers with EventPending
// (payload: holder, approvals: [PendingApproval…], at most
// maxPendingPerEvent per event), at most once per syncReplyEvery however
// many ask: the answer is broadcast, so one serves every Module that asked.
const (
	EventSync    = "ApprovalSync"
	EventPending = "ApprovalPending"
)

const (
	maxPendingPerEvent = 100
	syncReplyEvery     = 250 * time.Millisecond
)

// remoteAnswerTimeout bounds how long Resolve waits for the holder of an
// approval on another Engine.
const remoteAnswerTimeout = 10 * time.Second

// maxRemote bounds the approvals held elsewhere tracked at once (what
// other Engines can make this one keep).
const maxRemote = 10000

type verdictPayload struct {
	VerdictID  string `json:"verdict_id"`
	ApprovalID string `json:"approval_id"`
	Decision   string `json:"decision"`
	Remember   string `json:"remember"`
	ResolvedBy string `json:"resolved_by"`
	From       string `json:"from"`
	// Content is a question's answer (at most MaxAnswerBytes as JSON).
	Content map[string]any `json:"content,omitempty"`
}

// holder is what replication needs of the gate that holds this Engine's
// own approvals.
type holder interface {
	// held lists the approvals the gate holds, for a sync reply.
	held() []PendingApproval
	// holds reports whether the gate holds approval id.
	holds(id string) bool
	// resolveLocal applies a verdict to an approval the gate holds.
	answerLocal(id, decision, remember string, content map[string]any, by, verdictID string) (Resolution, error)
	// markResolved and resolvedRecently keep the ids of approvals resolved
	// anywhere, so a late request or a second verdict is known as such.
	markResolved(id string)
	resolvedRecently(id string) bool
	publish(typ string, payload any)
}

// replication is the approval protocol between Modules sharing a lattice
// (lattice/nats): it tracks the approvals other Engines hold (from their
// EventRequested, EventResolved and EventPending), carries verdicts for
// them to their holders (EventVerdict), applies those meant for this
// Engine's gate, and answers the sync requests of Modules that join
// (EventSync). On the in-memory bus it hears only its own events, which
// it ignores.
type replication struct {
	node     string // this Module's identity on the lattice; set before subscribe
	gate     holder
	log      *slog.Logger
	stopping <-chan struct{} // closed when the Module stops
	// subs are the five subscriptions follow reads: EventRequested,
	// EventResolved, EventVerdict, EventSync, EventPending. One
	// subscription per type: each is one NATS subject the server filters.
	subs []lattice.Subscription

	mu      sync.Mutex
	remote  map[string]PendingApproval
	waiters map[string][]chan Resolution // Resolve calls waiting for a holder's outcome
	dropped uint64                       // remote approvals not tracked (over maxRemote)
}

func newReplication(gate holder, stopping <-chan struct{}) *replication {
	return &replication{
		gate: gate, stopping: stopping,
		remote:  map[string]PendingApproval{},
		waiters: map[string][]chan Resolution{},
	}
}

// subscribe takes the protocol's events from bus; on an error it holds
// none.
func (r *replication) subscribe(bus lattice.Bus) error {
	for _, typ := range []string{EventRequested, EventResolved, EventVerdict, EventSync, EventPending} {
		s, err := bus.Subscribe(lattice.Filter{Types: []string{typ}}, 1024)
		if err != nil {
			r.close()
			r.subs = nil
			return fmt.Errorf("approval: subscribe: %w", err)
		}
		r.subs = append(r.subs, s)
	}
	return nil
}

// close ends the subscriptions, and so follow. It only reads subs, which
// follow reads too.
func (r *replication) close() {
	for _, s := range r.subs {
		s.Close()
	}
}

// askSync asks every other Module on the lattice for the approvals it
// holds; from is this Module's node, or another name when this Module
// must answer too (after an outage, see Module.Resync).
func (r *replication) askSync(from string) {
	r.gate.publish(EventSync, map[string]string{"from": from})
}

// pending lists the approvals other Engines hold, dropping those whose
// holder is gone (a minute past their expiry without a resolution).
func (r *replication) pending(now time.Time) []PendingApproval {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PendingApproval, 0, len(r.remote))
	for id, p := range r.remote {
		if now.After(p.ExpiresAt.Add(time.Minute)) { // its holder is gone
			delete(r.remote, id)
			continue
		}
		out = append(out, p)
	}
	return out
}

// get returns the approval another Engine holds under id.
func (r *replication) get(id string) (PendingApproval, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.remote[id]
	return p, ok
}

// resolve sends a verdict on an approval another Engine holds and waits
// for its holder's outcome. ok is false when no other Engine is known to
// hold id.
func (r *replication) resolve(ctx context.Context, id, decision, remember string, content map[string]any, resolvedBy string) (res Resolution, ok bool, err error) {
	r.mu.Lock()
	if _, ok := r.remote[id]; !ok {
		r.mu.Unlock()
		return Resolution{}, false, nil
	}
	answer := make(chan Resolution, 1)
	r.waiters[id] = append(r.waiters[id], answer)
	r.mu.Unlock()
	defer r.dropWaiter(id, answer)

	v := verdictPayload{VerdictID: lattice.NewID(time.Now()), ApprovalID: id, Decision: decision, Remember: remember, ResolvedBy: resolvedBy, From: r.node, Content: content}
	r.gate.publish(EventVerdict, v)
	timer := time.NewTimer(remoteAnswerTimeout)
	defer timer.Stop()
	select {
	case res := <-answer:
		if res.VerdictID != v.VerdictID {
			return res, true, fmt.Errorf("%w: %s (%s by %s)", ErrAlreadyResolved, id, res.Status, res.ResolvedBy)
		}
		return res, true, nil
	case <-timer.C:
		return Resolution{}, true, fmt.Errorf("%w: %s within %s", ErrNoAnswer, id, remoteAnswerTimeout)
	case <-ctx.Done():
		return Resolution{}, true, ctx.Err()
	case <-r.stopping:
		return Resolution{}, true, ErrStopped
	}
}

func (r *replication) dropWaiter(id string, ch chan Resolution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := slices.DeleteFunc(r.waiters[id], func(c chan Resolution) bool { return c == ch })
	if len(ws) == 0 {
		delete(r.waiters, id)
	} else {
		r.waiters[id] = ws
	}
}

// follow tracks the approval events of other Engines on the lattice,
// applies verdicts meant for this one and answers sync requests. It is the
// one goroutine that reads the subscriptions, so the events of one
// approval are handled in the order they came; it ends when they close.
func (r *replication) follow() {
	chans := make([]<-chan lattice.Event, len(r.subs))
	for i, s := range r.subs {
		chans[i] = s.Events()
	}
	requested, resolved, verdicts, syncs, pendings := chans[0], chans[1], chans[2], chans[3], chans[4]
	var lastReply time.Time
	var replyAt <-chan time.Time // a sync reply is due
	for requested != nil || resolved != nil || verdicts != nil || syncs != nil || pendings != nil {
		select {
		case ev, ok := <-requested:
			if !ok {
				requested = nil
				continue
			}
			r.onRequested(ev.Payload)
		case ev, ok := <-resolved:
			if !ok {
				resolved = nil
				continue
			}
			r.onResolved(ev)
		case ev, ok := <-verdicts:
			if !ok {
				verdicts = nil
				continue
			}
			r.onVerdict(ev)
		case ev, ok := <-syncs:
			if !ok {
				syncs = nil
				continue
			}
			var req struct{ From string }
			if json.Unmarshal(ev.Payload, &req) != nil || req.From == r.node || replyAt != nil {
				continue
			}
			if wait := syncReplyEvery - time.Since(lastReply); wait > 0 {
				replyAt = time.After(wait) // one reply serves every request until then
				continue
			}
			r.replySync()
			lastReply = time.Now()
		case <-replyAt:
			replyAt = nil
			r.replySync()
			lastReply = time.Now()
		case ev, ok := <-pendings:
			if !ok {
				pendings = nil
				continue
			}
			var snap struct {
				Holder    string            `json:"holder"`
				Approvals []json.RawMessage `json:"approvals"`
			}
			if json.Unmarshal(ev.Payload, &snap) != nil || snap.Holder == r.node {
				continue
			}
			for _, p := range snap.Approvals {
				r.onRequested(p)
			}
		}
	}
}

// replySync publishes the approvals this Module holds, for Modules that
// joined the lattice after they were requested.
func (r *replication) replySync() {
	local := r.gate.held()
	if len(local) == 0 {
		return
	}
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(local, func(i, j int) bool { return local[i].ApprovalID < local[j].ApprovalID })
	for chunk := range slices.Chunk(local, maxPendingPerEvent) {
		r.gate.publish(EventPending, map[string]any{"holder": r.node, "approvals": chunk})
	}
}

// onRequested tracks an approval another Engine holds (an
// ApprovalRequested payload, or one of an EventPending's).
func (r *replication) onRequested(payload json.RawMessage) {
	var p PendingApproval
	if json.Unmarshal(payload, &p) != nil || p.ApprovalID == "" || p.Holder == "" || p.Holder == r.node {
		return
	}
	// Another process's event: keep only what a listing needs, bounded.
	p.Arguments, _ = preview(json.RawMessage(p.Arguments))
	p.ApprovalID, p.AgentID, p.TaskID = clip(p.ApprovalID), clip(p.AgentID), clip(p.TaskID)
	p.Tool, p.Server, p.Fingerprint, p.Holder = clip(p.Tool), clip(p.Server), clip(p.Fingerprint), clip(p.Holder)
	p.Kind, p.Message = clip(p.Kind), clipTo(p.Message, MaxQuestionMessage)
	if len(p.Schema) > MaxQuestionSchemaBytes || (len(p.Schema) > 0 && !json.Valid(p.Schema)) {
		p.Schema = nil
	}
	// follow handles this approval's resolution on this goroutine too, so
	// it cannot be marked between this check and the insert below.
	if r.gate.resolvedRecently(p.ApprovalID) {
		return // its resolution overtook it
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.remote) >= maxRemote {
		r.dropped++
		if r.dropped == 1 || r.dropped%1000 == 0 {
			r.log.Warn("too many approvals pending on other engines; not listing more", "limit", maxRemote, "dropped", r.dropped)
		}
		return
	}
	r.remote[p.ApprovalID] = p
}

func (r *replication) onResolved(ev lattice.Event) {
	var res Resolution
	if json.Unmarshal(ev.Payload, &res) != nil || res.ApprovalID == "" || res.Holder == r.node {
		return
	}
	// Marked before it leaves remote: a Resolve that no longer finds it
	// there finds it resolved.
	r.gate.markResolved(res.ApprovalID)
	r.mu.Lock()
	delete(r.remote, res.ApprovalID)
	ws := r.waiters[res.ApprovalID]
	delete(r.waiters, res.ApprovalID)
	r.mu.Unlock()
	for _, w := range ws {
		w <- res // buffered 1, one send each
	}
}

func (r *replication) onVerdict(ev lattice.Event) {
	var v verdictPayload
	if json.Unmarshal(ev.Payload, &v) != nil || v.ApprovalID == "" || v.From == r.node {
		return
	}
	if v.Decision != Allow && v.Decision != Deny {
		return
	}
	if v.Remember != Always {
		v.Remember = Once
	}
	if !r.gate.holds(v.ApprovalID) {
		return
	}
	by := clip(v.ResolvedBy)
	if by == "" {
		by = "lattice"
	}
	if _, err := r.gate.answerLocal(v.ApprovalID, v.Decision, v.Remember, v.Content, by, v.VerdictID); err != nil {
		r.log.Info("verdict from another engine not applied", "approval", v.ApprovalID, "error", err)
	}
}
