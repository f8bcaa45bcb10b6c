package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/natskv"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// chatModel is an httptest server speaking the OpenAI chat-completions
// wire: it records every request's messages and answers "answer to: " and
// the last user message. A user message holding "block" is answered only
// when release is closed (or the caller gives up).
type chatModel struct {
	srv     *httptest.Server
	started chan string
	release chan struct{}
	mu      sync.Mutex
	reqs    [][]chatMsg
}

type chatMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func newChatModel(t *testing.T) *chatModel {
	m := &chatModel{started: make(chan string, 16), release: make(chan struct{})}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []chatMsg `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.reqs = append(m.reqs, req.Messages)
		m.mu.Unlock()
		last := ""
		for _, msg := range req.Messages {
			if msg.Role == "user" {
				last = msg.Content
			}
		}
		if strings.Contains(last, "block") {
			m.started <- last
			select {
			case <-m.release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "answer to: " + last}}},
		})
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// agent is an openai-type model on the server, as a config's provider
// with base_url would be.
func (m *chatModel) agent(t *testing.T) agent.Model {
	t.Helper()
	model, err := openai.New(provider.Config{BaseURL: m.srv.URL + "/v1", APIKey: "test-key", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return model
}

// lastRequest is the messages of the model's last request.
func (m *chatModel) lastRequest() []chatMsg {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reqs) == 0 {
		return nil
	}
	return m.reqs[len(m.reqs)-1]
}

// holds reports whether msgs hold the user message and the answer to it.
func holds(msgs []chatMsg, user string) bool {
	for i, m := range msgs {
		if m.Role == "user" && m.Content == user {
			return i+1 < len(msgs) && msgs[i+1].Role == "assistant" && msgs[i+1].Content == "answer to: "+user
		}
	}
	return false
}

type convNode struct {
	name  string
	e     *axocoatl.Engine
	store *natskv.Store
	conn  *natsgo.Conn // the store's
}

// newConvNode is a daemon: an Engine on the NATS lattice with the cluster
// module, its conversations in the shared KV bucket (on a connection of
// their own, as a daemon that dies loses all of its).
func newConvNode(t *testing.T, url, name string, renew time.Duration, agents map[string]agent.Model) *convNode {
	t.Helper()
	bus, err := latticenats.Connect(url, latticenats.Options{Prefix: "ct", Node: name}, natsgo.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsgo.Connect(url, natsgo.Name(name+"/conversations"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := natskv.Open(context.Background(), natskv.Config{Conn: nc, Bucket: "ct_conversations", LeaseRenew: renew})
	if err != nil {
		t.Fatal(err)
	}
	e := axocoatl.New(axocoatl.Options{Bus: bus, Conversations: store})
	for id, model := range agents {
		if err := e.AddAgent(agent.Spec{ID: id, Timeout: time.Minute}, model); err != nil {
			t.Fatal(err)
		}
	}
	m, err := cluster.New(fast)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Close(ctx)
		_ = store.Close()
		nc.Close()
		_ = bus.Close()
	})
	return &convNode{name: name, e: e, store: store, conn: nc}
}

func turn(t *testing.T, n *convNode, agentID, convID, input string) axocoatl.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := n.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: agentID, Input: input, ConversationID: convID, Source: axocoatl.SourceAPI})
	if err != nil {
		t.Fatalf("turn %q through %s: %v", input, n.name, err)
	}
	return res
}

// An agent hosted by both daemons: turn one through A runs on A, turn two
// through B runs on B, and B's model request holds turn one (read from the
// shared bucket). A remote agent's turns run where it lives: the
// conversation id comes back to the caller, and the caller's store is
// not where they are kept (its Engine does not touch it).
func TestConversationAcrossDaemons(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), t.TempDir())
	url := ns.ClientURL()
	model := newChatModel(t)
	a := newConvNode(t, url, "node-a", 0, map[string]agent.Model{"both": model.agent(t)})
	b := newConvNode(t, url, "node-b", 0, map[string]agent.Model{"both": model.agent(t), "only-b": model.agent(t)})
	eventually(t, "A lists only-b on B", 5*time.Second, func() bool { return lists(a.e, "only-b", "node-b") })

	one := turn(t, a, "both", conversation.New, "turn one through A")
	if one.ConversationID == "" {
		t.Fatal("no conversation id")
	}
	turn(t, b, "both", one.ConversationID, "turn two through B")
	if req := model.lastRequest(); !holds(req, "turn one through A") {
		t.Fatalf("B's model request does not hold turn one: %+v", req)
	}
	msgs, err := a.store.Messages(context.Background(), one.ConversationID, 0, 0)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("A reads %d messages of the conversation (%v), want 4", len(msgs), err)
	}

	// The remote path: A's door, B's agent.
	r1 := turn(t, a, "only-b", conversation.New, "remote one")
	if r1.ConversationID == "" || r1.ConversationID == conversation.New {
		t.Fatalf("the remote turn's conversation id: %q", r1.ConversationID)
	}
	info, err := b.store.Get(context.Background(), r1.ConversationID)
	if err != nil || info.AgentID != "only-b" || info.Messages != 2 {
		t.Fatalf("the remote turn's conversation on B: %+v, %v", info, err)
	}
	r2 := turn(t, a, "only-b", r1.ConversationID, "remote two")
	if r2.ConversationID != r1.ConversationID {
		t.Fatalf("turn two answered conversation %q, sent %q", r2.ConversationID, r1.ConversationID)
	}
	if req := model.lastRequest(); !holds(req, "remote one") {
		t.Fatalf("turn two's request does not hold turn one: %+v", req)
	}
	// A client-chosen id (A2A's contextId) starts a conversation over
	// the wire too; an unknown one without it is not found, on B's side,
	// and said so on A's.
	ctx := context.Background()
	res, err := a.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "only-b", Input: "x", ConversationID: "client-ctx-1", CreateConversation: true})
	if err != nil || res.ConversationID != "client-ctx-1" {
		t.Fatalf("a client-chosen id through A: %+v, %v", res, err)
	}
	_, err = a.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "only-b", Input: "x", ConversationID: "never-made"})
	if !errors.Is(err, conversation.ErrNotFound) {
		t.Fatalf("an unknown conversation through A: %v, want conversation.ErrNotFound", err)
	}
	_, err = a.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "only-b", Input: "x", ConversationID: one.ConversationID})
	if !errors.Is(err, conversation.ErrOtherAgent) {
		t.Fatalf("another agent's conversation through A: %v, want conversation.ErrOtherAgent", err)
	}
	_, err = a.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "only-b", Input: "x", ConversationID: "bad id"})
	if !errors.Is(err, conversation.ErrInvalidID) {
		t.Fatalf("a malformed id through A: %v, want conversation.ErrInvalidID", err)
	}
}

// The caller's Engine never touches its own store for a remote agent: a
// daemon whose conversations are in memory, calling an agent of a daemon
// on the shared bucket, keeps none.
func TestRemoteTurnSkipsCallerStore(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), t.TempDir())
	model := newChatModel(t)
	b := newConvNode(t, ns.ClientURL(), "node-b", 0, map[string]agent.Model{"only-b": model.agent(t)})
	a := newNode(t, ns.ClientURL(), "node-a", fast, nil) // its conversations in memory
	eventually(t, "A lists only-b", 5*time.Second, func() bool { return lists(a.e, "only-b", "node-b") })
	res, err := a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "only-b", Input: "hi", ConversationID: conversation.New})
	if err != nil || res.ConversationID == "" {
		t.Fatalf("%+v, %v", res, err)
	}
	if p, _ := a.e.Conversations().List(context.Background(), conversation.Query{}); len(p.Conversations) != 0 {
		t.Fatalf("the caller's own store holds %+v", p.Conversations)
	}
	if _, err := b.store.Get(context.Background(), res.ConversationID); err != nil {
		t.Fatalf("the host's store: %v", err)
	}
}

// Turns of one conversation never overlap across daemons: while a turn
// runs through A, B's turn of it is refused with conversation.ErrBusy,
// whether B runs it itself or sends it to A.
func TestConversationLeaseAcrossDaemons(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), t.TempDir())
	model := newChatModel(t)
	a := newConvNode(t, ns.ClientURL(), "node-a", 0, map[string]agent.Model{"both": model.agent(t), "only-a": model.agent(t)})
	b := newConvNode(t, ns.ClientURL(), "node-b", 0, map[string]agent.Model{"both": model.agent(t)})
	eventually(t, "B lists only-a", 5*time.Second, func() bool { return lists(b.e, "only-a", "node-a") })

	for _, agentID := range []string{"both", "only-a"} {
		first := turn(t, a, agentID, conversation.New, "first")
		done := make(chan error, 1)
		go func() {
			_, err := a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: agentID, Input: "block here", ConversationID: first.ConversationID})
			done <- err
		}()
		<-model.started
		_, err := b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: agentID, Input: "concurrent", ConversationID: first.ConversationID})
		if !errors.Is(err, conversation.ErrBusy) {
			t.Errorf("%s: B's turn while A's runs: %v, want conversation.ErrBusy", agentID, err)
		}
		model.release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		turn(t, b, agentID, first.ConversationID, "after")
		if req := model.lastRequest(); !holds(req, "block here") {
			t.Fatalf("%s: the turn after does not hold the one that ran: %+v", agentID, req)
		}
	}
}

// A daemon killed mid-turn: its lease ends (within three lease_renew
// intervals) and the conversation continues on the other daemon, with
// every turn recorded before.
func TestConversationContinuesAfterDaemonDies(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), t.TempDir())
	model := newChatModel(t)
	const renew = 200 * time.Millisecond
	a := newConvNode(t, ns.ClientURL(), "node-a", renew, map[string]agent.Model{"both": model.agent(t)})
	b := newConvNode(t, ns.ClientURL(), "node-b", renew, map[string]agent.Model{"both": model.agent(t)})

	zero := turn(t, a, "both", conversation.New, "turn zero")
	go func() {
		_, _ = a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "both", Input: "block: A dies", ConversationID: zero.ConversationID})
	}()
	<-model.started
	if _, err := b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "both", Input: "too soon", ConversationID: zero.ConversationID}); !errors.Is(err, conversation.ErrBusy) {
		t.Fatalf("B's turn while A's runs: %v, want ErrBusy", err)
	}
	died := time.Now()
	a.conn.Close() // A is gone: its store renews nothing and releases nothing
	var err error
	for {
		_, err = b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "both", Input: "turn two on B", ConversationID: zero.ConversationID})
		if !errors.Is(err, conversation.ErrBusy) || time.Since(died) > 30*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("B's turn after A died (%v ago): %v", time.Since(died), err)
	}
	if req := model.lastRequest(); !holds(req, "turn zero") {
		t.Fatalf("B's turn does not hold turn zero: %+v", req)
	}
	t.Logf("the dead daemon's lease ended %v after it died (lease_renew %v)", time.Since(died), renew)
	close(model.release)
}

// A turn sent to a daemon before conversations (which answers the 0x02
// frame as malformed) is 503 naming the version mismatch; a one-shot task
// still goes out in the frame such a daemon reads.
func TestTurnToOlderDaemon(t *testing.T) {
	ns := startNATS(t, -1)
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	old, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	frames := make(chan byte, 4)
	sub, err := old.Subscribe("ct-cluster.exec.far", func(msg *natsgo.Msg) {
		frames <- msg.Data[0]
		if msg.Data[0] != 0x01 {
			_ = msg.Respond(cluster.DoneBody("failed", "cluster: malformed task request"))
			return
		}
		_ = msg.Respond([]byte{'D', 0, 0, 'o', 'k'})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = old.Publish("ct-cluster.announce", []byte(`{"node":"old","ttl_ms":60000,"agents":[{"id":"far"}]}`))
	_ = old.Flush()
	eventually(t, "B lists far on old", 5*time.Second, func() bool { return lists(b.e, "far", "old") })
	if res, err := b.e.Execute(context.Background(), "far", "x"); err != nil || res.Output != "ok" {
		t.Fatalf("a one-shot task to an older daemon: %+v, %v", res, err)
	}
	if f := <-frames; f != 0x01 {
		t.Fatalf("a one-shot task went out as frame %#x", f)
	}
	_, err = b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "far", Input: "x", ConversationID: conversation.New})
	if !errors.Is(err, axocoatl.ErrUnavailable) || !strings.Contains(err.Error(), "conversation turns") {
		t.Fatalf("a turn to an older daemon: %v", err)
	}
	if f := <-frames; f != 0x02 {
		t.Fatalf("a turn went out as frame %#x", f)
	}
}

// The cluster case through a door: turn one through A (its Go
// API), turn two through B's A2A 1.0 door by an a2a-go/v2 client that
// names the conversation as its contextId, and B's model is sent turn one.
func TestConversationThroughAnotherDaemonsA2ADoor(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), t.TempDir())
	url := ns.ClientURL()
	model := newChatModel(t)
	a := newConvNode(t, url, "node-a", 0, map[string]agent.Model{"both": model.agent(t)})
	b := newConvNode(t, url, "node-b", 0, map[string]agent.Model{"both": model.agent(t)})
	one := turn(t, a, "both", conversation.New, "turn one through A")

	door, err := a2a.New(a2a.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.e.Use(context.Background(), door); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(door)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card, err := v1card.NewResolver(srv.Client()).Resolve(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v1client.NewFromCard(ctx, card, v1client.WithJSONRPCTransport(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	msg := a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("turn two through B's A2A door"))
	msg.ContextID = one.ConversationID
	res, err := c.SendMessage(ctx, &a2a1.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a1.Task)
	if !ok || task.Status.State != a2a1.TaskStateCompleted || task.ContextID != one.ConversationID {
		t.Fatalf("B's A2A answer: %#v", res)
	}
	if req := model.lastRequest(); !holds(req, "turn one through A") {
		t.Fatalf("B's model request does not hold turn one: %+v", req)
	}
	if msgs, err := a.store.Messages(ctx, one.ConversationID, 0, 0); err != nil || len(msgs) != 4 {
		t.Fatalf("A reads %d messages after B's turn (%v), want 4", len(msgs), err)
	}
}
