package httpapi

import (
	"context"
	"errors"
	"fmt"
	"github.com/axocoatl/axocoatl-go"
	"math"
	"net/http"
	"strconv"

	"github.com/axocoatl/axocoatl-go/conversation"
)

// Bounds of the conversation routes' pages.
const (
	// DefaultConversationsPage is how many conversations GET
	// /api/conversations returns without ?limit=.
	DefaultConversationsPage = 50
	// MaxConversationsPage bounds ?limit= of GET /api/conversations
	// ([conversation.MaxPage]); a larger one is refused with 400.
	MaxConversationsPage = conversation.MaxPage
	// DefaultMessagesPage is how many messages GET
	// /api/conversations/{id} returns without ?limit=.
	DefaultMessagesPage = 100
	// MaxMessagesPage bounds ?limit= of GET /api/conversations/{id}; a
	// larger one is refused with 400.
	MaxMessagesPage = 1000
)

// ConversationsPage is the answer of GET /api/conversations: a
// [conversation.Page], newest first, with "next" the cursor of the next
// page (absent on the last).
type ConversationsPage = conversation.Page

// ConversationView is the answer of GET /api/conversations/{id}: the
// conversation and a page of its messages, oldest first. NextFrom is the
// ?from= of the next page; absent on the last.
type ConversationView struct {
	Conversation conversation.Info      `json:"conversation"`
	Messages     []conversation.Message `json:"messages"`
	NextFrom     *int                   `json:"next_from,omitempty"`
}

// listConversations answers GET /api/conversations?agent=&limit=&cursor=.
func (m *Module) listConversations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := pageParam(w, q.Get("limit"), "limit", DefaultConversationsPage, 1, MaxConversationsPage)
	if !ok {
		return
	}
	agentID := q.Get("agent")
	if agentID != "" {
		if _, err := m.eng.AgentFor(r.Context(), agentID); err != nil {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("agent %q not found", truncated(agentID)))
			return
		}
	}
	page, err := m.conversations(r, conversation.Query{AgentID: agentID, Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		m.writeConversationError(w, err)
		return
	}
	if page.Conversations == nil {
		page.Conversations = []conversation.Info{}
	}
	writeJSON(w, http.StatusOK, page)
}

// getConversation answers GET /api/conversations/{id}?from=&limit=.
func (m *Module) getConversation(w http.ResponseWriter, r *http.Request) {
	info, ok := m.visibleConversation(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	from, ok := pageParam(w, q.Get("from"), "from", 0, 0, math.MaxInt32)
	if !ok {
		return
	}
	limit, ok := pageParam(w, q.Get("limit"), "limit", DefaultMessagesPage, 1, MaxMessagesPage)
	if !ok {
		return
	}
	// One more than the page says whether another follows, whatever
	// turns were appended since Get read the Info.
	msgs, err := m.eng.Conversations().Messages(r.Context(), info.ID, from, limit+1)
	if err != nil {
		m.writeConversationError(w, err)
		return
	}
	view := ConversationView{Conversation: info, Messages: msgs}
	if len(msgs) > limit {
		view.Messages = msgs[:limit]
		next := from + limit
		view.NextFrom = &next
	}
	if view.Messages == nil {
		view.Messages = []conversation.Message{}
	}
	writeJSON(w, http.StatusOK, view)
}

// deleteConversation answers DELETE /api/conversations/{id}: 204.
func (m *Module) deleteConversation(w http.ResponseWriter, r *http.Request) {
	info, ok := m.visibleConversation(w, r)
	if !ok {
		return
	}
	if err := m.eng.Conversations().Delete(r.Context(), info.ID); err != nil {
		m.writeConversationError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// conversations is the one way the API lists conversations: every page a
// client sees comes through here. A caller whose [axocoatl.Identity] sees
// only some agents sees only their conversations: the store's pages are
// read (each whole, so that cursors stay exact) and filtered until the
// page is full, at most maxFilteredPages of them per request.
// [Module.visibleConversation] is the same rule for one conversation.
func (m *Module) conversations(r *http.Request, q conversation.Query) (conversation.Page, error) {
	id := axocoatl.IdentityFrom(r.Context())
	if !id.Restricted() {
		return m.eng.Conversations().List(r.Context(), q)
	}
	limit := q.Limit
	var out conversation.Page
	for range maxFilteredPages {
		q.Limit = limit - len(out.Conversations)
		page, err := m.eng.Conversations().List(r.Context(), q)
		if err != nil {
			return conversation.Page{}, err
		}
		for _, c := range page.Conversations {
			if id.SeesAgent(c.AgentID) {
				out.Conversations = append(out.Conversations, c)
			}
		}
		out.Next, q.Cursor = page.Next, page.Next
		if page.Next == "" || len(out.Conversations) >= limit {
			break
		}
	}
	return out, nil
}

// maxFilteredPages bounds the store pages one listing reads for a caller
// who sees only some agents; the page it answers may then be short, with
// a cursor to go on.
const maxFilteredPages = 10

// visibleConversation reads the conversation {id} of the request, or
// answers 400 (a malformed id) or 404 (none of that id) and returns false.
// As [Module.conversations] for listing, it hides the conversations of
// agents the caller's identity does not see: as 404, the answer for one
// that does not exist.
func (m *Module) visibleConversation(w http.ResponseWriter, r *http.Request) (conversation.Info, bool) {
	id := r.PathValue("id")
	if !conversation.ValidID(id) {
		writeError(w, http.StatusBadRequest, "bad_request", invalidIDMessage(id))
		return conversation.Info{}, false
	}
	info, err := m.eng.Conversations().Get(r.Context(), id)
	if err == nil && !axocoatl.IdentityFrom(r.Context()).SeesAgent(info.AgentID) {
		err = fmt.Errorf("%w: %q", conversation.ErrNotFound, id)
	}
	if err != nil {
		m.writeConversationError(w, err)
		return conversation.Info{}, false
	}
	return info, true
}

// pageParam reads an integer query parameter in [lo, hi]; "" is def.
func pageParam(w http.ResponseWriter, s, name string, def, lo, hi int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("?%s= must be an integer from %d to %d, not %q", name, lo, hi, truncated(s)))
		return 0, false
	}
	return n, true
}

func invalidIDMessage(id string) string {
	return fmt.Sprintf("invalid conversation id %q: 1 to %d of [A-Za-z0-9._:-], starting with a letter or digit", truncated(id), conversation.MaxIDLength)
}

// truncated cuts what a client sent before it is quoted back.
func truncated(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// conversationStatus maps an error of a conversation (of the store, or of
// a turn the Engine refused) to its HTTP status, code and message; ok
// false: not a conversation error. A conversation of another agent is
// answered as not found, in words that do not say it exists.
func conversationStatus(err error) (status int, code, msg string, ok bool) {
	switch {
	case errors.Is(err, conversation.ErrInvalidID):
		return http.StatusBadRequest, "bad_request", err.Error(), true
	case errors.Is(err, conversation.ErrBadCursor):
		return http.StatusBadRequest, "bad_request", "?cursor= is not one a page returned: " + err.Error(), true
	case errors.Is(err, conversation.ErrOtherAgent):
		return http.StatusNotFound, "not_found", "conversation not found for this agent", true
	case errors.Is(err, conversation.ErrNotFound):
		return http.StatusNotFound, "not_found", err.Error(), true
	case errors.Is(err, conversation.ErrBusy):
		return http.StatusConflict, "conversation_busy", err.Error() + " (turns of a conversation never overlap: retry when it has ended)", true
	case errors.Is(err, conversation.ErrFull):
		return http.StatusConflict, "conversation_full", err.Error(), true
	case errors.Is(err, conversation.ErrClosed):
		return http.StatusServiceUnavailable, "shutting_down", err.Error(), true
	}
	return 0, "", "", false
}

// writeConversationError answers err of a conversation route. An error
// that is none of the store's sentinels (a disk, a NATS server) is logged
// and answered without its text, which may name what the client need not
// see.
func (m *Module) writeConversationError(w http.ResponseWriter, err error) {
	status, code, msg, ok := conversationStatus(err)
	if !ok {
		status, code, msg = http.StatusInternalServerError, "conversation_store", "the conversation store failed (the daemon's log says why)"
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			status, code, msg = http.StatusServiceUnavailable, "canceled", "the request ended before the conversation store answered"
		}
		m.log.Warn("conversation store", "error", err)
	}
	if code == "conversation_busy" {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, status, code, msg)
}
