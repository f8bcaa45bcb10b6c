package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/a2awire"
	"github.com/axocoatl/axocoatl-go/internal/httpheader"
	"github.com/axocoatl/axocoatl-go/internal/netguard"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Push notifications (A2A 1.0 §3.5.3/§4.3, 0.3 §9.5): a client registers
// a URL for a task (CreateTaskPushNotificationConfig, 0.3
// tasks/pushNotificationConfig/set, or the configuration of a send), and
// the task's updates are POSTed there through the Engine's [axocoatl.Pusher]
// (the egress module's durable queue: retries, dead letters, its delivery
// log), with the Authorization of the config's authentication and the
// Pusher's signature. A 1.0 config gets StreamResponse objects: a status
// update (the state when it was registered, if the task was still going),
// one each time the task asks its caller for input (input-required, the
// question in its message), then at the end the artifact update (a
// completed task's output), the final status update and the final task.
// A 0.3 config gets the Task object at each of these moments (as a2a-go
// v0.3's sender does). Deliveries are concurrent
// and may arrive out of order: the final task carries the whole outcome.

// Header names of a push notification's token.
const (
	pushTokenHeader1  = "A2A-Notification-Token"   // A2A 1.0 (a2a-go/v2)
	pushTokenHeader03 = "X-A2A-Notification-Token" // A2A 0.3 (a2a-go v0.3)
)

// Bounds of one push config's fields.
const (
	maxPushURL   = 2048
	maxPushID    = 128
	maxPushToken = 1024
	maxPushCreds = 8192
)

// EventPush is the event type of push deliveries in the log of the
// [axocoatl.Pusher] ([axocoatl.PushRequest].EventType; egress's
// X-Axocoatl-Event).
const EventPush = "a2a.PushNotification"

// pushConfig is one registered config. cred is the client's credential:
// never in an answer, a log line or an event.
type pushConfig struct {
	id           string
	taskID       a2a03.TaskID
	g            generation
	url          string
	host         string
	token        string
	scheme       string
	cred         secret.Secret
	allowPrivate bool
	// owner is who registered it ([pushOwner]): only that caller (or an
	// admin) reads, replaces or deletes it.
	owner string
}

// pushOwner is the owner of the configs ctx's caller registers: its
// identity's name (a server.tokens name, "api_token", "jwt:<sub>"), ""
// for an unrestricted caller.
func pushOwner(ctx context.Context) string {
	if id := axocoatl.IdentityFrom(ctx); id != nil {
		return id.Name
	}
	return ""
}

// seesConfig reports whether ctx's caller may read or delete c: the
// caller that registered it, or one with scope admin (an unrestricted
// caller included). Another caller's config is not found, as if it did
// not exist.
func seesConfig(ctx context.Context, c *pushConfig) bool {
	return axocoatl.IdentityFrom(ctx).Can(axocoatl.ScopeAdmin) || c.owner == pushOwner(ctx)
}

// pushTask is the configs of one task.
type pushTask struct {
	configs  []*pushConfig
	watching bool // a goroutine waits for the task's end
	ended    bool // the end was queued to the configs of then
}

// pushRegistry keeps the configs, bounded per task and in all
// ([Config].MaxPushConfigsPerTask, [Config].MaxPushConfigs).
type pushRegistry struct {
	mu     sync.Mutex
	tasks  map[a2a03.TaskID]*pushTask
	total  int
	hosts  []string // a2a.push_allowed_hosts
	max    int
	perTsk int
}

func newPushRegistry(c Config) *pushRegistry {
	return &pushRegistry{tasks: map[a2a03.TaskID]*pushTask{}, hosts: c.PushAllowedHosts,
		max: c.MaxPushConfigs, perTsk: c.MaxPushConfigsPerTask}
}

// pusher is the Engine's [axocoatl.Pusher] ([axocoatl.Engine.Pusher]), or
// the error a push method answers.
func (h *Handler) pusher() (axocoatl.Pusher, *rpcError) {
	if p, ok := h.eng.Pusher(); ok {
		return p, nil
	}
	return nil, rpcErr(a2awire.CodePushNotSupported, "this agent sends no push notifications (push delivery is not enabled: push.enabled); poll GetTask or stream")
}

// pushing reports whether the cards advertise push notifications: the
// Engine has an [axocoatl.Pusher].
func (h *Handler) pushing() bool {
	_, ok := h.eng.Pusher()
	return ok
}

// newPushConfig checks what a client sent: an absolute http(s) URL of at
// most 2048 bytes whose host is not a loopback, private or link-local
// address (unless in [Config].PushAllowedHosts), an Authorization that is
// a valid header.
func (h *Handler) newPushConfig(g generation, taskID a2a03.TaskID, id, rawURL, token, scheme, cred string) (*pushConfig, *rpcError) {
	bad := func(format string, args ...any) (*pushConfig, *rpcError) {
		return nil, rpcErr(a2awire.CodeInvalidParams, format, args...)
	}
	switch {
	case rawURL == "":
		return bad("push notification config: url is required")
	case len(rawURL) > maxPushURL:
		return bad("push notification config: url is %d bytes, more than %d", len(rawURL), maxPushURL)
	case len(id) > maxPushID:
		return bad("push notification config: id is %d bytes, more than %d", len(id), maxPushID)
	case len(token) > maxPushToken:
		return bad("push notification config: token is %d bytes, more than %d", len(token), maxPushToken)
	case len(cred) > maxPushCreds:
		return bad("push notification config: authentication.credentials are %d bytes, more than %d", len(cred), maxPushCreds)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return bad("push notification config: url must be an absolute http or https URL")
	}
	if u.User != nil {
		return bad("push notification config: url must not carry credentials; use authentication")
	}
	host := u.Hostname()
	allowed := netguard.Allowed(host, h.push.hosts)
	if !allowed {
		if err := netguard.CheckHost(host); err != nil {
			return bad("push notification config: url host %s refused: %v; push notifications go to public addresses only, unless the host is in a2a.push_allowed_hosts",
				cut(host, 255), err)
		}
	}
	if cred != "" && scheme == "" {
		return bad("push notification config: authentication.scheme is required with credentials (Bearer, Basic, …)")
	}
	if scheme != "" && !validToken(scheme) {
		return bad("push notification config: authentication.scheme must be an HTTP auth scheme token (Bearer, Basic, …)")
	}
	if cred != "" && (httpheader.Problem("Authorization", scheme+" "+cred) != "" || !headerText(cred)) {
		return bad("push notification config: authentication.credentials are not a valid header value (visible ASCII)")
	}
	if token != "" && (httpheader.Problem(pushTokenHeader1, token) != "" || !headerText(token)) {
		return bad("push notification config: token is not a valid header value (visible ASCII)")
	}
	if id == "" {
		id = lattice.NewID(time.Now())
	}
	return &pushConfig{id: id, taskID: taskID, g: g, url: rawURL, host: host, token: token, scheme: scheme,
		cred: secret.Secret(cred), allowPrivate: allowed}, nil
}

// headerText: visible ASCII and spaces, what every HTTP stack sends and
// takes in a header value.
func headerText(s string) bool {
	for _, c := range []byte(s) {
		if (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// validToken: an RFC 9110 token.
func validToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// register stores c for t (replacing a config of the same id) and queues
// the notifications it is owed now: the current status of a task still
// going, or the end of one that ended.
func (h *Handler) register(t *task, c *pushConfig) *rpcError {
	p, rerr := h.pusher()
	if rerr != nil {
		return rerr
	}
	// Taken before the status below is read: a prompt shown after it is
	// pushed by the watcher (at worst a status twice, never one missed).
	t.mu.Lock()
	asked := t.asked
	t.mu.Unlock()
	r := h.push
	r.mu.Lock()
	pt := r.tasks[t.id]
	if pt == nil {
		pt = &pushTask{}
	}
	// Each caller has its own config ids: one of the same id registered
	// by another caller is another config.
	i := slices.IndexFunc(pt.configs, func(o *pushConfig) bool { return o.id == c.id && o.owner == c.owner })
	if i < 0 {
		if len(pt.configs) >= r.perTsk {
			r.mu.Unlock()
			return rpcErr(a2awire.CodeInvalidParams, "task %s has %d push notification configs, the most a task may have (a2a.max_push_configs_per_task); delete one first", t.id, len(pt.configs))
		}
		if r.total >= r.max {
			r.sweepLocked(h.store)
		}
		if r.total >= r.max {
			r.mu.Unlock()
			return rpcErr(a2awire.CodeServerError, "%d push notification configs are registered, the most this server keeps (a2a.max_push_configs); retry later", r.total)
		}
		pt.configs = append(pt.configs, c)
		r.total++
	} else {
		pt.configs[i] = c
	}
	r.tasks[t.id] = pt
	ended, watch := pt.ended, !pt.watching && !pt.ended
	pt.watching = pt.watching || watch
	r.mu.Unlock()

	h.log.Info("a2a push notification config registered", "task_id", t.id, "config_id", c.id, "host", c.host,
		"allowed_host", c.allowPrivate)
	switch {
	case ended:
		h.deliverEnd(p, t, []*pushConfig{c})
	case !t.view().state.Terminal():
		h.deliver(p, t, c, h.statusBody(t, c.g))
	}
	if watch {
		if err := h.join(); err != nil {
			// Closing: the task is canceled without a notification.
			r.mu.Lock()
			pt.watching = false
			r.mu.Unlock()
			return nil
		}
		go func() {
			defer h.runs.Done()
			h.watchTask(t, asked)
		}()
	}
	return nil
}

// watchTask queues t's notifications as it goes: each question it puts to
// its caller (input-required: the moment a caller who left must hear of,
// or the run waits for nobody), then its end.
// asked is t.asked as the first config was registered: it is closed, and
// replaced, as the task shows a prompt.
func (h *Handler) watchTask(t *task, asked <-chan struct{}) {
	for {
		select {
		case <-t.done:
			h.watchEnd(t)
			return
		case <-asked:
			t.mu.Lock()
			asked = t.asked
			t.mu.Unlock()
			h.pushStatus(t)
		case <-h.ctx.Done():
			// Close cancels every run: their tasks end at once.
			timer := time.NewTimer(5 * time.Second)
			defer timer.Stop()
			select {
			case <-t.done:
				h.watchEnd(t)
			case <-timer.C:
			}
			return
		}
	}
}

// pushStatus queues t's current status to every config it has (a prompt
// it shows now: the status carries the question).
func (h *Handler) pushStatus(t *task) {
	r := h.push
	r.mu.Lock()
	var cs []*pushConfig
	if pt := r.tasks[t.id]; pt != nil {
		cs = slices.Clone(pt.configs)
	}
	r.mu.Unlock()
	p, ok := h.eng.Pusher()
	if len(cs) == 0 || !ok {
		return
	}
	for _, c := range cs {
		h.deliver(p, t, c, h.statusBody(t, c.g))
	}
}

// watchEnd queues the end of t to every config it has, through the
// [axocoatl.Pusher] of then.
func (h *Handler) watchEnd(t *task) {
	r := h.push
	r.mu.Lock()
	pt := r.tasks[t.id]
	var cs []*pushConfig
	if pt != nil {
		pt.ended, pt.watching = true, false
		cs = slices.Clone(pt.configs)
		if len(cs) == 0 { // all deleted while it ran
			delete(r.tasks, t.id)
		}
	}
	r.mu.Unlock()
	if len(cs) == 0 {
		return
	}
	p, ok := h.eng.Pusher()
	if !ok {
		h.log.Warn("a2a push notifications not sent: no push delivery", "task_id", t.id, "configs", len(cs))
		return
	}
	h.deliverEnd(p, t, cs)
}

// deliverEnd queues the end of t to cs.
func (h *Handler) deliverEnd(p axocoatl.Pusher, t *task, cs []*pushConfig) {
	var b10, b03 [][]byte
	for _, c := range cs {
		if c.g == gen10 {
			if b10 == nil {
				b10 = h.endBodies10(t)
			}
			for _, b := range b10 {
				h.deliver(p, t, c, b)
			}
			continue
		}
		if b03 == nil {
			b, _ := json.Marshal(t.snapshot(0, true))
			b03 = [][]byte{b}
		}
		h.deliver(p, t, c, b03[0])
	}
}

// endBodies10 are the 1.0 notifications of a task's end.
func (h *Handler) endBodies10(t *task) [][]byte {
	var evs []any
	v := t.view()
	if v.state == a2a03.TaskStateCompleted {
		evs = append(evs, a2a1.StreamResponse{Event: &a2a1.TaskArtifactUpdateEvent{
			TaskID: a2a1.TaskID(t.id), ContextID: t.contextID, LastChunk: true,
			Artifact: &a2a1.Artifact{ID: a2a1.ArtifactID(outputArtifactID), Name: "output",
				Parts: a2a1.ContentParts{a2a1.NewTextPart(v.output)}},
		}})
	}
	evs = append(evs, a2a1.StreamResponse{Event: t.statusEventV1()}, a2a1.StreamResponse{Event: t.snapshotV1(0, true)})
	out := make([][]byte, 0, len(evs))
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			h.log.Error("a2a push notification not encoded", "task_id", t.id, "error", err)
			continue
		}
		out = append(out, b)
	}
	return out
}

// statusBody is the notification of t's current status.
func (h *Handler) statusBody(t *task, g generation) []byte {
	var b []byte
	if g == gen10 {
		b, _ = json.Marshal(a2a1.StreamResponse{Event: t.statusEventV1()})
	} else {
		b, _ = json.Marshal(t.snapshot(0, false))
	}
	return b
}

// deliver queues one notification to c: an [axocoatl.PushRequest] whose
// Header holds the credential as a [secret.Secret].
func (h *Handler) deliver(p axocoatl.Pusher, t *task, c *pushConfig, body []byte) {
	if len(body) == 0 {
		return
	}
	hdr := map[string]secret.Secret{}
	if !c.cred.IsZero() {
		hdr["Authorization"] = secret.Secret(c.scheme + " " + c.cred.Reveal())
	}
	if c.token != "" {
		name := pushTokenHeader1
		if c.g == gen03 {
			name = pushTokenHeader03
		}
		hdr[name] = secret.Secret(c.token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Push(ctx, axocoatl.PushRequest{URL: c.url, Header: hdr, Body: body, EventType: EventPush,
		Subject: string(t.id), AllowPrivate: c.allowPrivate}); err != nil {
		h.log.Warn("a2a push notification not queued", "task_id", t.id, "config_id", c.id, "host", c.host, "error", err)
	}
}

// sweepLocked forgets the configs of tasks the store no longer keeps.
func (r *pushRegistry) sweepLocked(s *taskStore) {
	for id, pt := range r.tasks {
		if s.get(id) == nil && !pt.watching {
			r.total -= len(pt.configs)
			delete(r.tasks, id)
		}
	}
}

// configs returns task id's configs that ctx's caller sees (a copy).
func (r *pushRegistry) configs(ctx context.Context, id a2a03.TaskID) []*pushConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*pushConfig
	if pt := r.tasks[id]; pt != nil {
		for _, c := range pt.configs {
			if seesConfig(ctx, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// remove deletes config cid of task id that ctx's caller sees (its own
// first); false when there is none.
func (r *pushRegistry) remove(ctx context.Context, id a2a03.TaskID, cid string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	pt := r.tasks[id]
	if pt == nil {
		return false
	}
	owner := pushOwner(ctx)
	i := slices.IndexFunc(pt.configs, func(c *pushConfig) bool { return c.id == cid && c.owner == owner })
	if i < 0 {
		i = slices.IndexFunc(pt.configs, func(c *pushConfig) bool { return c.id == cid && seesConfig(ctx, c) })
	}
	if i < 0 {
		return false
	}
	pt.configs = slices.Delete(pt.configs, i, i+1)
	r.total--
	if len(pt.configs) == 0 && !pt.watching {
		delete(r.tasks, id)
	}
	return true
}

// The wire shapes, credentials left out (A2A: a server need not return
// them), and the token too unless showToken: it authenticates the
// notifications to the client's receiver, so only a caller who may
// register configs (execute scope) is shown it ([tokenShown]); a reader
// would otherwise learn what makes a forged notification pass.

// tokenShown: the caller may see configs' tokens.
func tokenShown(ctx context.Context) bool {
	return axocoatl.IdentityFrom(ctx).Can(axocoatl.ScopeExecute)
}

func (c *pushConfig) v1(showToken bool) *a2a1.PushConfig {
	out := &a2a1.PushConfig{TaskID: a2a1.TaskID(c.taskID), ID: c.id, URL: c.url}
	if showToken {
		out.Token = c.token
	}
	if c.scheme != "" {
		out.Auth = &a2a1.PushAuthInfo{Scheme: c.scheme}
	}
	return out
}

func (c *pushConfig) v03(showToken bool) *a2a03.TaskPushConfig {
	out := &a2a03.TaskPushConfig{TaskID: c.taskID, Config: a2a03.PushConfig{ID: c.id, URL: c.url}}
	if showToken {
		out.Config.Token = c.token
	}
	if c.scheme != "" {
		out.Config.Auth = &a2a03.PushAuthInfo{Schemes: []string{c.scheme}}
	}
	return out
}

func configNotFound(id a2a03.TaskID, cid string) *rpcError {
	return rpcErr(a2awire.CodeTaskNotFound, "push notification config %q of task %s not found", cut(cid, maxPushID), id)
}

// The methods. Each looks the task up first (per-agent URLs see only
// their agent's tasks).

// pushCreate1 is CreateTaskPushNotificationConfig.
func (h *Handler) pushCreate1(ctx context.Context, pc *a2a1.PushConfig, pathAgent string) (*a2a1.PushConfig, *rpcError) {
	if rerr := needScope(ctx, axocoatl.ScopeExecute, "register push notification configs"); rerr != nil {
		return nil, rerr
	}
	if _, rerr := h.pusher(); rerr != nil {
		return nil, rerr
	}
	t, rerr := h.lookup(ctx, a2a03.TaskID(pc.TaskID), pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	var scheme, cred string
	if pc.Auth != nil {
		scheme, cred = pc.Auth.Scheme, pc.Auth.Credentials
	}
	c, rerr := h.newPushConfig(gen10, t.id, pc.ID, pc.URL, pc.Token, scheme, cred)
	if rerr != nil {
		return nil, rerr
	}
	c.owner = pushOwner(ctx)
	if rerr := h.register(t, c); rerr != nil {
		return nil, rerr
	}
	return c.v1(true), nil
}

// pushSet03 is tasks/pushNotificationConfig/set.
func (h *Handler) pushSet03(ctx context.Context, raw json.RawMessage, pathAgent string) (any, *rpcError) {
	if rerr := needScope(ctx, axocoatl.ScopeExecute, "register push notification configs"); rerr != nil {
		return nil, rerr
	}
	if _, rerr := h.pusher(); rerr != nil {
		return nil, rerr
	}
	var p a2a03.TaskPushConfig
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	t, rerr := h.lookup(ctx, p.TaskID, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	c, rerr := h.newPushConfig03(t.id, &p.Config)
	if rerr != nil {
		return nil, rerr
	}
	c.owner = pushOwner(ctx)
	if rerr := h.register(t, c); rerr != nil {
		return nil, rerr
	}
	return c.v03(true), nil
}

func (h *Handler) newPushConfig03(id a2a03.TaskID, pc *a2a03.PushConfig) (*pushConfig, *rpcError) {
	var scheme, cred string
	if pc.Auth != nil {
		if len(pc.Auth.Schemes) > 0 {
			scheme = pc.Auth.Schemes[0]
		}
		cred = pc.Auth.Credentials
	}
	return h.newPushConfig(gen03, id, pc.ID, pc.URL, pc.Token, scheme, cred)
}

// pushGet looks up one config of a task the caller may see.
func (h *Handler) pushGet(ctx context.Context, id a2a03.TaskID, cid, pathAgent string) (*pushConfig, *rpcError) {
	if _, rerr := h.pusher(); rerr != nil {
		return nil, rerr
	}
	if _, rerr := h.lookup(ctx, id, pathAgent); rerr != nil {
		return nil, rerr
	}
	cs := h.push.configs(ctx, id)
	if cid == "" && len(cs) == 1 { // 0.3: the id is optional
		return cs[0], nil
	}
	owner := pushOwner(ctx)
	for _, c := range cs { // the caller's own first (an admin sees others' of the same id)
		if c.id == cid && c.owner == owner {
			return c, nil
		}
	}
	for _, c := range cs {
		if c.id == cid {
			return c, nil
		}
	}
	return nil, configNotFound(id, cid)
}

// pushList lists a task's configs.
func (h *Handler) pushList(ctx context.Context, id a2a03.TaskID, pathAgent string) ([]*pushConfig, *rpcError) {
	if _, rerr := h.pusher(); rerr != nil {
		return nil, rerr
	}
	if _, rerr := h.lookup(ctx, id, pathAgent); rerr != nil {
		return nil, rerr
	}
	return h.push.configs(ctx, id), nil
}

// pushDelete deletes one config.
func (h *Handler) pushDelete(ctx context.Context, id a2a03.TaskID, cid, pathAgent string) *rpcError {
	if rerr := needScope(ctx, axocoatl.ScopeExecute, "delete push notification configs"); rerr != nil {
		return rerr
	}
	if _, rerr := h.pusher(); rerr != nil {
		return rerr
	}
	if _, rerr := h.lookup(ctx, id, pathAgent); rerr != nil {
		return rerr
	}
	if !h.push.remove(ctx, id, cid) {
		return configNotFound(id, cid)
	}
	return nil
}

// servePush03 answers the 0.3 tasks/pushNotificationConfig/* methods.
func (h *Handler) servePush03(ctx context.Context, method string, raw json.RawMessage, pathAgent string) (any, *rpcError) {
	switch method {
	case a2awire.Method03PushConfigSet:
		return h.pushSet03(ctx, raw, pathAgent)
	case a2awire.Method03PushConfigGet:
		var q a2a03.GetTaskPushConfigParams
		if rerr := decodeParams(raw, &q); rerr != nil {
			return nil, rerr
		}
		c, rerr := h.pushGet(ctx, q.TaskID, q.ConfigID, pathAgent)
		if rerr != nil {
			return nil, rerr
		}
		return c.v03(tokenShown(ctx)), nil
	case a2awire.Method03PushConfigList:
		var q a2a03.ListTaskPushConfigParams
		if rerr := decodeParams(raw, &q); rerr != nil {
			return nil, rerr
		}
		cs, rerr := h.pushList(ctx, q.TaskID, pathAgent)
		if rerr != nil {
			return nil, rerr
		}
		out := make([]*a2a03.TaskPushConfig, 0, len(cs))
		for _, c := range cs {
			out = append(out, c.v03(tokenShown(ctx)))
		}
		return out, nil
	default: // delete
		var q a2a03.DeleteTaskPushConfigParams
		if rerr := decodeParams(raw, &q); rerr != nil {
			return nil, rerr
		}
		return nil, h.pushDelete(ctx, q.TaskID, q.ConfigID, pathAgent)
	}
}

// servePush1 answers the 1.0 *TaskPushNotificationConfig methods.
func (h *Handler) servePush1(ctx context.Context, method string, raw json.RawMessage, pathAgent string) (any, *rpcError) {
	switch method {
	case a2awire.Method1PushCreate:
		var pc a2a1.PushConfig
		if rerr := decodeParams(raw, &pc); rerr != nil {
			return nil, rerr
		}
		return h.pushCreate1(ctx, &pc, pathAgent)
	case a2awire.Method1PushGet:
		var q a2a1.GetTaskPushConfigRequest
		if rerr := decodeParams(raw, &q); rerr != nil {
			return nil, rerr
		}
		c, rerr := h.pushGet(ctx, a2a03.TaskID(q.TaskID), q.ID, pathAgent)
		if rerr != nil {
			return nil, rerr
		}
		return c.v1(tokenShown(ctx)), nil
	case a2awire.Method1PushList:
		var q a2a1.ListTaskPushConfigRequest
		if rerr := decodeParams(raw, &q); rerr != nil {
			return nil, rerr
		}
		return h.pushListV1(ctx, a2a03.TaskID(q.TaskID), pathAgent)
	default: // delete
		var q a2a1.DeleteTaskPushConfigRequest
		if rerr := decodeParams(raw, &q); rerr != nil {
			return nil, rerr
		}
		if rerr := h.pushDelete(ctx, a2a03.TaskID(q.TaskID), q.ID, pathAgent); rerr != nil {
			return nil, rerr
		}
		return struct{}{}, nil
	}
}

func (h *Handler) pushListV1(ctx context.Context, id a2a03.TaskID, pathAgent string) (*a2a1.ListTaskPushConfigResponse, *rpcError) {
	cs, rerr := h.pushList(ctx, id, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	out := &a2a1.ListTaskPushConfigResponse{Configs: make([]*a2a1.PushConfig, 0, len(cs))}
	for _, c := range cs {
		out.Configs = append(out.Configs, c.v1(tokenShown(ctx)))
	}
	return out, nil
}

// restPush answers the HTTP+JSON push routes under
// {base}/tasks/{task}/pushNotificationConfigs.
func (h *Handler) restPush(w http.ResponseWriter, r *http.Request, pathAgent string) {
	if rerr := restVersion(r); rerr != nil {
		writeRESTError(w, rerr)
		return
	}
	ctx := r.Context()
	id := a2a03.TaskID(r.PathValue("task"))
	cid := r.PathValue("config")
	switch {
	case r.Method == http.MethodPost:
		body, err := h.readBody(w, r)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeRESTError(w, rpcErr(a2awire.CodeInvalidRequest, "request body exceeds %d bytes", tooBig.Limit))
				return
			}
			writeRESTError(w, rpcErr(a2awire.CodeParseError, "reading body: %v", err))
			return
		}
		var pc a2a1.PushConfig
		if err := json.Unmarshal(body, &pc); err != nil {
			writeRESTError(w, rpcErr(a2awire.CodeInvalidParams, "the body must be a TaskPushNotificationConfig: %v", err))
			return
		}
		if pc.TaskID != "" && a2a03.TaskID(pc.TaskID) != id {
			writeRESTError(w, rpcErr(a2awire.CodeInvalidParams, "taskId %q in the body is not the task of the path", cut(string(pc.TaskID), 64)))
			return
		}
		pc.TaskID = a2a1.TaskID(id)
		out, rerr := h.pushCreate1(ctx, &pc, pathAgent)
		if rerr != nil {
			writeRESTError(w, rerr)
			return
		}
		writeRESTJSON(w, out)
	case r.Method == http.MethodDelete:
		if rerr := h.pushDelete(ctx, id, cid, pathAgent); rerr != nil {
			writeRESTError(w, rerr)
			return
		}
		writeRESTJSON(w, struct{}{})
	case cid != "":
		c, rerr := h.pushGet(ctx, id, cid, pathAgent)
		if rerr != nil {
			writeRESTError(w, rerr)
			return
		}
		writeRESTJSON(w, c.v1(tokenShown(ctx)))
	default:
		out, rerr := h.pushListV1(ctx, id, pathAgent)
		if rerr != nil {
			writeRESTError(w, rerr)
			return
		}
		writeRESTJSON(w, out)
	}
}

// inlinePush checks the push config a send carries (before the task
// exists); registerInline registers it for the new task.
func (h *Handler) inlinePush(sr *sendRequest) (*pushConfig, *rpcError) {
	if _, rerr := h.pusher(); rerr != nil {
		return nil, rerr
	}
	if sr.push03 != nil {
		return h.newPushConfig03("", sr.push03)
	}
	pc := sr.push10
	var scheme, cred string
	if pc.Auth != nil {
		scheme, cred = pc.Auth.Scheme, pc.Auth.Credentials
	}
	return h.newPushConfig(gen10, "", pc.ID, pc.URL, pc.Token, scheme, cred)
}
