package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Multi Round-Trip Requests (SEP-2322), how the 2026-07-28 era asks the
// calling client's user: a tools/call whose run needs an answer (a gated
// tool call's approval, or a question with its schema) is answered with an
// InputRequiredResult carrying a form elicitation per question and an
// opaque requestState; the client calls the tool again with the same
// arguments, its inputResponses and that requestState, and the call goes on.
//
// The run does not end with the first request: it is owned by the Server
// between the rounds (an inputRun in s.inputs), its context detached from
// the request's but cancelled when a request waiting on it is cancelled,
// when the state's lifetime passes with no retry ([Config].InputTimeout,
// capped by the approval's own expiry), or when the Server closes. At most
// [Config].MaxInputCalls runs wait between rounds at once; beyond that, a
// run's question fails (the gate's other channels answer, or it denies).
//
// The requestState is "v1.<payload>.<mac>": the payload (base64url JSON)
// names the run, the round, this Server's instance and the expiry; the mac
// is HMAC-SHA256 under a key kept in DataDir (mcp_request_state.key, 32
// random bytes, created 0600 on first use; in memory without a DataDir).
// A state is good for one retry of its round: tampered (mac), foreign
// (another Server, or a call of another tool or client), expired and
// replayed (its round already answered, or its run gone) states are
// refused with -32602 naming which.

// Defaults of the 2026-07-28 input rounds.
const (
	DefaultInputTimeout  = 5 * time.Minute
	DefaultMaxInputCalls = 100
)

// StateKeyFile is the name of the requestState key in [Config].DataDir.
const StateKeyFile = "mcp_request_state.key"

// maxRequestStateBytes bounds the requestState a retry may carry (ours are
// some 200 bytes); a longer one is refused before it is decoded.
const maxRequestStateBytes = 1024

// Errors of a retry's requestState (wrapped in the -32602 error's message);
// check them with errors.Is on the server side.
var (
	ErrStateTampered = errors.New("requestState failed its integrity check (tampered, or not minted by this server)")
	ErrStateForeign  = errors.New("requestState belongs to another server, tool or client")
	ErrStateExpired  = errors.New("requestState expired")
	ErrStateReplayed = errors.New("requestState was already used, or its call has ended")
	// ErrTooManyInputCalls: [Config].MaxInputCalls runs already wait for
	// their clients' answers.
	ErrTooManyInputCalls = errors.New("mcpserver: too many 2026-07-28 calls wait for their clients' input (mcp_server.max_input_calls)")
)

// inputs is the Server's table of runs between rounds.
type inputs struct {
	mu       sync.Mutex
	runs     map[string]*inputRun
	closed   bool
	wg       sync.WaitGroup // the runs' goroutines
	instance string         // this Server's id in its states

	keyOnce sync.Once
	key     []byte
	keyErr  error
}

// inputRun is one run of a 2026-07-28 call that can ask its client.
type inputRun struct {
	id      string
	tool    string
	caller  string             // over HTTP: a digest of the caller's identity (callerDigest)
	session *mcp.ServerSession // on stdio: the session that started it
	cancel  context.CancelFunc
	done    chan struct{} // closed once result is set
	result  *mcp.CallToolResult
	asked   chan *inputAsk // the run's questions, taken by the request waiting on it

	// Under inputs.mu:
	round   int                  // the round whose state is good
	open    map[string]*inputAsk // put to the client, not yet answered
	parked  bool                 // no request waits on it; in inputs.runs
	expires time.Time
	timer   *time.Timer
	nextKey int
	rounds  int // requests that waited on it: at most maxInputRounds ask
}

// maxInputRounds bounds the requests of one call that may put questions to
// the client (a retry that answers nothing is asked again, up to this);
// beyond, its questions fail and the run goes on without them.
const maxInputRounds = 32

// inputAsk is one question of the run.
type inputAsk struct {
	key     string
	prompt  axocoatl.UserPrompt
	answer  chan askResult // 1-buffered: one answer or one failure
	gone    chan struct{}  // closed when the asker stopped waiting
	expires time.Time
	refused error // under inputs.mu: why the client's last answer was refused
}

type askResult struct {
	answer axocoatl.UserAnswer
	err    error
}

// PromptUser implements [axocoatl.UserPrompter]: the question goes to the
// request that waits on the run (now, or the client's next retry), and the
// answer comes with a retry.
func (r *inputRun) PromptUser(ctx context.Context, p axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
	a := &inputAsk{prompt: p, answer: make(chan askResult, 1), gone: make(chan struct{})}
	defer close(a.gone)
	if p.Approval != nil {
		a.expires = p.Approval.ExpiresAt
	}
	select {
	case r.asked <- a:
	case <-ctx.Done():
		return axocoatl.UserAnswer{}, ctx.Err()
	}
	select {
	case res := <-a.answer:
		return res.answer, res.err
	case <-ctx.Done():
		return axocoatl.UserAnswer{}, ctx.Err()
	}
}

// failAsk gives a an error instead of an answer.
func failAsk(a *inputAsk, err error) {
	a.answer <- askResult{err: err}
}

// inputCapable reports whether a 2026-07-28 request's client declared
// form elicitation (in its _meta): it can answer an InputRequiredResult.
//
// It reads the _meta the go-sdk has already decoded (and validated as
// client capabilities before the call reached its tool) rather than
// asking req.ClientCapabilities, which encodes that map and decodes it
// again, with a 32 KiB decoder buffer, on every call of the era: the
// go-sdk's stateless dispatch already makes some fourteen such decodes a
// call, and the collector they keep busy is what the era's first progress
// notification waits for on a loaded machine (bench/README.md, "first
// delta"). A value of any other shape falls back to the go-sdk's reading.
func inputCapable(req *mcp.CallToolRequest) bool {
	if form, known := metaFormElicitation(req.Params.GetMeta()); known {
		return form
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	el := caps.Elicitation
	return el.Form != nil || el.URL == nil
}

// metaFormElicitation reads form elicitation from a request's decoded
// _meta as the go-sdk would (an "elicitation" object with "form", or with
// neither "form" nor "url": forms are the default; JSON null is absent).
// known is false when the capabilities are not there as decoded JSON
// objects (absent, or built in process as typed values), for the caller
// to ask the go-sdk.
func metaFormElicitation(meta map[string]any) (form, known bool) {
	caps, ok := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	if !ok {
		return false, false
	}
	raw, present := caps["elicitation"]
	if !present || raw == nil {
		return false, true
	}
	el, ok := raw.(map[string]any)
	if !ok {
		return false, false
	}
	// Each is an object or absent (null is absent); a value of another
	// kind is the go-sdk's to judge.
	formV, urlV := el["form"], el["url"]
	if !objectOrNil(formV) || !objectOrNil(urlV) {
		return false, false
	}
	return formV != nil || urlV == nil, true
}

// objectOrNil reports whether a decoded JSON value is an object or absent.
func objectOrNil(v any) bool {
	_, obj := v.(map[string]any)
	return v == nil || obj
}

// callerDigest identifies the HTTP caller of a request (a digest, never
// the credentials): the identity the Engine's guard found (a token's
// name, a JWT's subject: serveSDK gives X-API-Key callers one placeholder
// Authorization, so the header cannot tell them apart), else the
// Authorization header; "" on stdio.
func callerDigest(key []byte, req *mcp.CallToolRequest) string {
	if req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	mac := hmac.New(sha256.New, key)
	if id := requestIdentity(req); id != nil {
		mac.Write([]byte("identity\x00" + id.Name))
	} else {
		mac.Write([]byte("caller\x00" + req.Extra.Header.Get("Authorization")))
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// stateKey returns the requestState key, reading or creating it on first
// use.
func (s *Server) stateKey() ([]byte, error) {
	in := &s.inputs
	in.keyOnce.Do(func() {
		if s.cfg.DataDir == "" {
			in.key = make([]byte, 32)
			_, in.keyErr = rand.Read(in.key)
			return
		}
		in.key, in.keyErr = loadOrCreateKey(filepath.Join(s.cfg.DataDir, StateKeyFile))
	})
	return in.key, in.keyErr
}

// loadOrCreateKey reads a 32-byte key, or creates it 0600: written whole
// to a temporary file, then linked into place (no-clobber), so that of two
// processes on one data dir one creates it and the other reads it, never
// half written.
func loadOrCreateKey(path string) ([]byte, error) {
	for range 3 {
		b, err := os.ReadFile(path)
		if err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("mcpserver: %s holds %d bytes, want 32: remove it to make a new key", path, len(b))
			}
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("mcpserver: reading the requestState key: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("mcpserver: %w", err)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		f, err := os.CreateTemp(filepath.Dir(path), StateKeyFile+".*.tmp") // 0600
		if err != nil {
			return nil, fmt.Errorf("mcpserver: creating the requestState key: %w", err)
		}
		_, werr := f.Write(key)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Link(f.Name(), path)
		}
		os.Remove(f.Name())
		if errors.Is(werr, fs.ErrExist) {
			continue // another process made it: read it
		}
		if werr != nil {
			return nil, fmt.Errorf("mcpserver: writing the requestState key: %w", werr)
		}
		return key, nil
	}
	return nil, fmt.Errorf("mcpserver: %s is neither readable nor creatable", path)
}

// statePayload is what a requestState says, under its mac.
type statePayload struct {
	Run      string `json:"r"`
	Round    int    `json:"n"`
	Instance string `json:"i"`
	Expires  int64  `json:"x"` // unix milliseconds
}

func (s *Server) mintState(p statePayload) (string, error) {
	key, err := s.stateKey()
	if err != nil {
		return "", err
	}
	raw, _ := json.Marshal(p)
	body := base64.RawURLEncoding.EncodeToString(raw)
	return "v1." + body + "." + stateMAC(key, body), nil
}

func stateMAC(key []byte, body string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("axocoatl mcp requestState v1\x00" + body))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// openState checks a requestState's form, mac, instance and expiry.
func (s *Server) openState(state string, now time.Time) (statePayload, error) {
	var p statePayload
	if len(state) > maxRequestStateBytes {
		return p, fmt.Errorf("%w: %d bytes, longer than any this server mints", ErrStateTampered, len(state))
	}
	parts := strings.Split(state, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return p, ErrStateTampered
	}
	key, err := s.stateKey()
	if err != nil {
		return p, err
	}
	if !hmac.Equal([]byte(stateMAC(key, parts[1])), []byte(parts[2])) {
		return p, ErrStateTampered
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(raw, &p) != nil {
		return p, ErrStateTampered
	}
	if p.Instance != s.inputs.instance {
		return p, fmt.Errorf("%w: it was minted by another server process (its run is not here; the call must start over)", ErrStateForeign)
	}
	if exp := time.UnixMilli(p.Expires); now.After(exp) {
		return p, fmt.Errorf("%w at %s", ErrStateExpired, exp.UTC().Format(time.RFC3339))
	}
	return p, nil
}

// stateError is the -32602 error of a refused requestState.
func stateError(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: "invalid requestState: " + err.Error() + "; call the tool again without requestState and inputResponses to start a new call"}
}

// callWithInput runs a 2026-07-28 call whose client can answer
// InputRequiredResults: a first call (no requestState) starts the run; a
// retry answers its questions and waits on it again.
func (s *Server) callWithInput(ctx context.Context, req *mcp.CallToolRequest, start func(context.Context, axocoatl.UserPrompter) *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	if req.Params.RequestState != "" {
		r, err := s.resumeRun(req)
		if err != nil {
			return nil, stateError(err)
		}
		return s.await(ctx, r)
	}
	key, err := s.stateKey()
	if err != nil {
		s.log.Error("2026-07-28 input rounds off: no requestState key", "error", err)
		return start(ctx, noElicitation), nil
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &inputRun{
		id: lattice.NewID(time.Now()), tool: req.Params.Name, caller: callerDigest(key, req),
		cancel: cancel, done: make(chan struct{}), asked: make(chan *inputAsk),
	}
	if r.caller == "" {
		r.session = req.Session
	}
	in := &s.inputs
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	in.wg.Add(1) // under mu while open: Close's Wait comes after
	in.mu.Unlock()
	go func() {
		defer in.wg.Done()
		defer cancel()
		r.result = start(runCtx, r)
		close(r.done)
	}()
	return s.await(ctx, r)
}

// await waits for the run's end or its next questions, as long as ctx (the
// request) lasts; a request that ends first ends the run.
func (s *Server) await(ctx context.Context, r *inputRun) (*mcp.CallToolResult, error) {
	in := &s.inputs
	in.mu.Lock()
	pending := make([]*inputAsk, 0, len(r.open))
	for k, a := range r.open { // asked before and not answered: ask again
		select {
		case <-a.gone: // answered elsewhere (a verdict on the dashboard), or withdrawn
			delete(r.open, k)
		default:
			pending = append(pending, a)
		}
	}
	r.rounds++
	tooMany := r.rounds > maxInputRounds
	in.mu.Unlock()
	if tooMany {
		in.mu.Lock()
		for _, a := range pending {
			delete(r.open, a.key)
		}
		in.mu.Unlock()
		for _, a := range pending {
			failAsk(a, fmt.Errorf("mcpserver: the client made %d rounds without answering", maxInputRounds))
		}
		pending = pending[:0]
	}
	for {
		for len(pending) == 0 {
			select {
			case a := <-r.asked:
				pending = append(pending, a)
			case <-r.done:
				s.forget(r)
				return r.result, nil
			case <-ctx.Done():
				r.cancel()
				s.forget(r)
				<-r.done
				return nil, ctx.Err()
			}
		}
		// Questions asked at the same moment (parallel tool calls) go in
		// one round.
		for more := true; more; {
			select {
			case a := <-r.asked:
				pending = append(pending, a)
			default:
				more = false
			}
		}
		if res, ok := s.park(r, pending); ok {
			return res, nil
		}
		pending = pending[:0] // failed: the run goes on without them
	}
}

// park answers the request with an InputRequiredResult for pending, and
// keeps the run until the client's retry or the state's expiry. ok false:
// the run cannot wait (closing, MaxInputCalls, no key); pending's
// questions have failed.
func (s *Server) park(r *inputRun, pending []*inputAsk) (res *mcp.CallToolResult, ok bool) {
	in := &s.inputs
	now := time.Now()
	expires := now.Add(s.cfg.InputTimeout)
	fail := func(err error) (*mcp.CallToolResult, bool) {
		for _, a := range pending {
			delete(r.open, a.key)
			failAsk(a, err)
		}
		return nil, false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return fail(ErrClosed)
	}
	if len(in.runs) >= s.cfg.MaxInputCalls {
		s.log.Warn("a 2026-07-28 call's question not put to its client", "error", ErrTooManyInputCalls, "max_input_calls", s.cfg.MaxInputCalls)
		return fail(ErrTooManyInputCalls)
	}
	if r.open == nil {
		r.open = map[string]*inputAsk{}
	}
	reqs := mcp.InputRequestMap{}
	for _, a := range pending {
		if a.key == "" {
			if a.prompt.Approval != nil {
				a.key = "approval_" + a.prompt.Approval.ID
			} else {
				r.nextKey++
				a.key = "question_" + strconv.Itoa(r.nextKey)
			}
		}
		r.open[a.key] = a
		if !a.expires.IsZero() && a.expires.Before(expires) {
			expires = a.expires
		}
		schema := confirmSchema
		if a.prompt.Schema != nil {
			schema = a.prompt.Schema
		}
		msg := a.prompt.Message
		if a.refused != nil {
			msg = refusedMessage(a.refused, msg)
		}
		reqs[a.key] = &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: schema}
	}
	state, err := s.mintState(statePayload{Run: r.id, Round: r.round + 1, Instance: in.instance, Expires: expires.UnixMilli()})
	if err != nil {
		s.log.Error("requestState not minted", "error", err)
		return fail(err)
	}
	r.round++
	r.parked, r.expires = true, expires
	if in.runs == nil {
		in.runs = map[string]*inputRun{}
	}
	in.runs[r.id] = r
	round := r.round
	r.timer = time.AfterFunc(time.Until(expires), func() { s.expire(r, round) })
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}, true
}

// expire ends a run whose client did not come back in time.
func (s *Server) expire(r *inputRun, round int) {
	in := &s.inputs
	in.mu.Lock()
	if !r.parked || r.round != round || in.runs[r.id] != r {
		in.mu.Unlock()
		return
	}
	delete(in.runs, r.id)
	r.parked = false
	in.mu.Unlock()
	s.log.Info("a 2026-07-28 call's client did not come back with its answers; its run ends", "tool", r.tool, "waited", s.cfg.InputTimeout)
	r.cancel()
}

// endSessionRuns ends the runs a stdio session started that wait for its
// client's next round: their states are good on that session alone, so
// once it is over nobody can answer them, and waiting InputTimeout would
// only hold the run (and its approval) for nothing.
func (s *Server) endSessionRuns(ss *mcp.ServerSession) {
	in := &s.inputs
	var ended []*inputRun
	in.mu.Lock()
	for id, r := range in.runs {
		if r.session == ss && r.parked {
			delete(in.runs, id)
			r.parked = false
			if r.timer != nil {
				r.timer.Stop()
			}
			ended = append(ended, r)
		}
	}
	in.mu.Unlock()
	for _, r := range ended {
		s.log.Info("a 2026-07-28 call's stdio session ended before its client answered; its run ends", "tool", r.tool)
		r.cancel()
	}
}

// forget drops a run from the table.
func (s *Server) forget(r *inputRun) {
	in := &s.inputs
	in.mu.Lock()
	if in.runs[r.id] == r {
		delete(in.runs, r.id)
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	r.parked = false
	in.mu.Unlock()
}

// resumeRun checks a retry's requestState, takes its run back from the table
// (the state is spent) and gives the questions their answers.
func (s *Server) resumeRun(req *mcp.CallToolRequest) (*inputRun, error) {
	p, err := s.openState(req.Params.RequestState, time.Now())
	if err != nil {
		return nil, err
	}
	key, err := s.stateKey()
	if err != nil {
		return nil, err
	}
	in := &s.inputs
	in.mu.Lock()
	r, ok := in.runs[p.Run]
	switch {
	case !ok || !r.parked || r.round != p.Round:
		in.mu.Unlock()
		return nil, ErrStateReplayed
	case r.tool != req.Params.Name:
		in.mu.Unlock()
		return nil, fmt.Errorf("%w: it is for a call of tool %s", ErrStateForeign, r.tool)
	case r.caller != callerDigest(key, req) || r.session != nil && r.session != req.Session:
		in.mu.Unlock()
		return nil, fmt.Errorf("%w: another client started that call", ErrStateForeign)
	}
	r.parked = false
	r.timer.Stop()
	delete(in.runs, r.id)
	type reply struct {
		key string
		ask *inputAsk
		ans axocoatl.UserAnswer
	}
	var replies []reply
	for k, a := range r.open {
		res, ok := req.Params.InputResponses[k].(*mcp.ElicitResult)
		if !ok || res == nil {
			continue // not answered: asked again
		}
		replies = append(replies, reply{k, a, axocoatl.UserAnswer{Accepted: res.Action == "accept", Content: res.Content, By: ElicitationBy}})
	}
	in.mu.Unlock()
	// The asker's own check before an answer is taken (outside the table's
	// lock: the run is this request's now); a bad one stays open and is
	// asked again (next round), saying why.
	refused := map[*inputAsk]error{}
	for i, rp := range replies {
		if !rp.ans.Accepted || rp.ask.prompt.Check == nil {
			continue
		}
		checked, err := rp.ask.prompt.Check(rp.ans.Content)
		if err != nil {
			refused[rp.ask] = err
			continue
		}
		replies[i].ans.Content = checked
	}
	answered := map[*inputAsk]axocoatl.UserAnswer{}
	in.mu.Lock()
	for _, rp := range replies {
		if err, bad := refused[rp.ask]; bad {
			rp.ask.refused = err
			continue
		}
		delete(r.open, rp.key)
		answered[rp.ask] = rp.ans
	}
	in.mu.Unlock()
	for a, ans := range answered {
		if !ans.Accepted {
			ans.Content = nil
		}
		a.answer <- askResult{answer: ans}
	}
	return r, nil
}

// closeInputs ends the runs waiting between rounds, and waits (bounded)
// for every run this table started.
func (s *Server) closeInputs(within time.Duration) {
	in := &s.inputs
	in.mu.Lock()
	in.closed = true
	runs := make([]*inputRun, 0, len(in.runs))
	for _, r := range in.runs {
		runs = append(runs, r)
		if r.timer != nil {
			r.timer.Stop()
		}
	}
	in.runs = nil
	in.mu.Unlock()
	for _, r := range runs {
		r.cancel()
	}
	ended := make(chan struct{})
	go func() { in.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(within):
	}
}

// InputCalls returns how many 2026-07-28 calls wait now for their clients'
// answers between rounds.
func (s *Server) InputCalls() int {
	s.inputs.mu.Lock()
	defer s.inputs.mu.Unlock()
	return len(s.inputs.runs)
}
