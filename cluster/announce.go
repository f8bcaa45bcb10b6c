package cluster

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
)

// announcement is a daemon's heartbeat: who it is, the agents it serves,
// how long to keep them listed without another word.
type announcement struct {
	Node string `json:"node"`
	// Instance tells two daemons that (wrongly) share a node name apart.
	Instance string      `json:"instance,omitempty"`
	TTLMS    int64       `json:"ttl_ms"`
	Hello    bool        `json:"hello,omitempty"`   // just joined (or back): everyone announce now
	Leaving  bool        `json:"leaving,omitempty"` // stopping: forget my agents now
	Agents   []agentWire `json:"agents"`
}

// agentWire is an agent as announced: what the listings show.
type agentWire struct {
	ID            string   `json:"id"`
	Name          string   `json:"name,omitempty"`
	Description   string   `json:"description,omitempty"`
	Provider      string   `json:"provider,omitempty"`
	Model         string   `json:"model,omitempty"`
	Tools         []string `json:"tools"` // null: all tools
	MaxIterations int      `json:"max_iterations,omitempty"`
	TimeoutMS     int64    `json:"timeout_ms,omitempty"`
	Offline       bool     `json:"offline,omitempty"`
	Running       int      `json:"running,omitempty"`
}

func wireOf(a axocoatl.AgentInfo) agentWire {
	return agentWire{
		ID: a.ID, Name: a.Name, Description: a.Description, Provider: a.Provider, Model: a.Model,
		Tools: a.Tools, MaxIterations: a.MaxIterations, TimeoutMS: a.Timeout.Milliseconds(),
		Offline: a.Offline, Running: a.Running,
	}
}

// info is the agent as the Engine lists it, hosted on nodes.
func (w agentWire) info(nodes string) axocoatl.AgentInfo {
	return axocoatl.AgentInfo{
		Spec: agent.Spec{
			ID: w.ID, Name: w.Name, Description: w.Description, Provider: w.Provider, Model: w.Model,
			Tools: w.Tools, MaxIterations: max(w.MaxIterations, 0), Timeout: max(time.Duration(w.TimeoutMS)*time.Millisecond, 0),
		},
		Offline: w.Offline, Running: max(w.Running, 0), Node: nodes,
	}
}

// localAgents lists the agents this Engine hosts itself.
func (m *Module) localAgents() []axocoatl.AgentInfo {
	return slices.DeleteFunc(m.eng.Agents(), func(a axocoatl.AgentInfo) bool { return a.Node != "" })
}

// announceLocked publishes this daemon's heartbeat. Agents that would make
// it larger than MaxAnnounceBytes are left out (and logged once per
// change).
func (m *Module) announceLocked(hello, leaving bool) {
	a := announcement{Node: m.node, Instance: m.instance, TTLMS: m.cfg.ExpireAfter.Milliseconds(), Hello: hello, Leaving: leaving, Agents: []agentWire{}}
	if !leaving {
		size := 128 + len(m.node)
		for _, info := range m.localAgents() {
			w := wireOf(info)
			b, _ := json.Marshal(w)
			if size+len(b)+1 > m.cfg.MaxAnnounceBytes {
				m.logOnce("agents left out of the announcement: over cluster.max_announce_bytes", "limit", m.cfg.MaxAnnounceBytes, "announced", len(a.Agents))
				break
			}
			size += len(b) + 1
			a.Agents = append(a.Agents, w)
		}
	}
	data, err := json.Marshal(a)
	if err != nil {
		return
	}
	// A publish while NATS is down is buffered by the client (bounded by
	// its reconnect buffer) or refused: either way the next beat follows.
	_ = m.publish(m.subj+".announce", "", data)
}

// logOnce logs a bound reached, once per distinct message until the next
// Start.
func (m *Module) logOnce(msg string, args ...any) {
	m.dropped++
	if m.dropped == 1 || m.dropped%1000 == 0 {
		m.log.Warn(msg, append(args, "count", m.dropped)...)
	}
}

// onAnnounce runs on the NATS client's dispatch goroutine for every
// daemon's heartbeat.
func (m *Module) onAnnounce(msg *natsgo.Msg) {
	if m.keys != nil && len(msg.Data) > m.cfg.MaxAnnounceBytes+clustersig.Overhead+2 {
		// Too big to be one: not worth a MAC.
		m.mu.Lock()
		m.logOnce("announcement dropped: over cluster.max_announce_bytes", "bytes", len(msg.Data), "limit", m.cfg.MaxAnnounceBytes)
		m.mu.Unlock()
		return
	}
	if !m.keys.Open(msg, m.guardAnnounce, "announcement") {
		return // counted, logged: no daemon joins unsigned
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		return
	}
	if len(msg.Data) > m.cfg.MaxAnnounceBytes {
		m.logOnce("announcement dropped: over cluster.max_announce_bytes", "bytes", len(msg.Data), "limit", m.cfg.MaxAnnounceBytes)
		return
	}
	var a announcement
	if json.Unmarshal(msg.Data, &a) != nil || !validNode(a.Node) {
		return
	}
	if a.Node == m.node {
		if a.Instance != "" && a.Instance != m.instance {
			// Another daemon with this name: neither lists the other's
			// agents, and each takes the other's events for its own
			// (webhooks queued twice, metrics counted twice).
			m.twins++
			if m.twins == 1 || m.twins%100 == 0 {
				m.log.Error("another daemon on this NATS uses the same node name: node names must differ (lattice.node)", "count", m.twins)
			}
		}
		return
	}
	if a.Hello {
		select { // a newcomer: let it hear from us now, not in a second
		case m.kick <- struct{}{}:
		default:
		}
	}
	p, known := m.peers[a.Node]
	if a.Leaving {
		if known {
			m.log.Info("daemon left the cluster", "peer", a.Node)
			m.forgetLocked(a.Node, "left the cluster")
		}
		return
	}
	if !known {
		if len(m.peers) >= m.cfg.MaxNodes {
			m.logOnce("announcement dropped: over cluster.max_nodes daemons", "peer", a.Node, "limit", m.cfg.MaxNodes)
			return
		}
		p = &peer{}
		m.peers[a.Node] = p
		m.log.Info("daemon joined the cluster", "peer", a.Node, "agents", len(a.Agents))
	}
	p.seen = time.Now()
	p.ttl = min(max(time.Duration(a.TTLMS)*time.Millisecond, 2*m.cfg.HeartbeatInterval), maxPeerTTL)
	// An id announced twice by one daemon counts once (the first): it
	// would else be listed as hosted twice there, its Running summed.
	ids := make(map[string]struct{}, len(a.Agents))
	agents := slices.DeleteFunc(a.Agents, func(w agentWire) bool {
		if _, dup := ids[w.ID]; dup || !validSubjectToken(w.ID) || w.info("x").Validate() != nil {
			return true
		}
		ids[w.ID] = struct{}{}
		return false
	})
	if !known || !slices.EqualFunc(agents, p.agents, sameAgent) {
		p.agents = agents
		m.reconcileLocked()
	}
}

// sameAgent compares announced agents, Running included (the listings
// show it).
func sameAgent(a, b agentWire) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func validNode(n string) bool {
	return n != "" && len(n) <= 128 && !strings.ContainsAny(n, " \t\r\n.*>")
}

// expireLocked drops daemons not heard from within their TTL. While this
// daemon's own connection is down nobody is heard: nothing expires then.
func (m *Module) expireLocked(now time.Time) {
	if !m.connected {
		return
	}
	for node, p := range m.peers {
		if now.Sub(p.seen) > p.ttl {
			m.log.Warn("daemon silent: its agents are no longer listed", "peer", node, "silent_for", now.Sub(p.seen).Round(time.Millisecond))
			m.forgetLocked(node, "stopped answering (heartbeat expired)")
		}
	}
}

// forgetLocked removes a daemon: its agents leave the Engine's list, the
// tasks sent to it fail, the tasks it sent here are cancelled.
func (m *Module) forgetLocked(node, why string) {
	delete(m.peers, node)
	m.reconcileLocked()
	for _, c := range m.calls {
		if c.node == node {
			send(c, execReply{lost: "daemon " + node + " " + why + " while running the task"})
		}
	}
	for _, s := range m.running {
		if s.from == node {
			s.cancel(errCallerLeft)
		}
	}
}

// reconcileLocked makes the Engine's remote agents those the peers
// announce: one entry per agent id, run by any daemon hosting it.
func (m *Module) reconcileLocked() {
	type want struct {
		w     agentWire
		nodes []string
	}
	wanted := map[string]*want{}
	for node, p := range m.peers {
		for _, a := range p.agents {
			if x, ok := wanted[a.ID]; ok {
				running := x.w.Running + a.Running
				if node < slices.Min(x.nodes) {
					x.w = a // the definition of the first node by name
				}
				x.w.Running = running
				x.nodes = append(x.nodes, node)
				continue
			}
			wanted[a.ID] = &want{w: a, nodes: []string{node}}
		}
	}
	for id, r := range m.registered {
		if _, ok := wanted[id]; !ok {
			r.remove()
			delete(m.registered, id)
		}
	}
	for id, x := range wanted {
		slices.Sort(x.nodes)
		nodes := strings.Join(x.nodes, ",")
		b, _ := json.Marshal(x.w)
		sig := nodes + "\n" + string(b)
		if r, ok := m.registered[id]; ok && r.sig == sig {
			continue
		}
		remove, err := m.eng.AddRemoteAgent(x.w.info(nodes), m.runRemote)
		if err != nil {
			m.log.Warn("remote agent not listed", "agent", id, "nodes", nodes, "error", err)
			continue
		}
		m.registered[id] = &registration{sig: sig, remove: remove}
	}
}

// localAgentsChanged runs when the Engine's agent set changes: a new local
// agent is served and announced at once.
func (m *Module) localAgentsChanged() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping || m.closing {
		return
	}
	if err := m.serveLocalLocked(); err != nil {
		m.log.Warn("serving a new agent failed", "error", err)
	}
}

// serveLocalLocked subscribes the exec subject of every local agent not
// served yet, and asks for an announcement when the set changed.
func (m *Module) serveLocalLocked() error {
	var ids []string
	for _, a := range m.localAgents() {
		ids = append(ids, a.ID)
		if _, ok := m.served[a.ID]; ok || !validSubjectToken(a.ID) {
			continue
		}
		// Delivered to the workers' queue by the NATS reader (see work).
		s, err := m.nc.ChanQueueSubscribe(m.subj+".exec."+a.ID, "exec", m.tasks)
		if err != nil {
			return err
		}
		m.served[a.ID] = s
	}
	if sig := strings.Join(ids, ","); sig != m.localSig {
		m.localSig = sig
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
	return nil
}
