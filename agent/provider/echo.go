package provider

import (
	"context"
	"strings"
	"unicode"

	"github.com/axocoatl/axocoatl-go/agent"
)

// EchoModel is the offline, deterministic model: it answers with the last
// user message and never calls tools. It is the built-in default.
//
// It streams ([agent.Streamer]) word by word, so the offline default shows
// an answer being written: each word with the spaces that follow it is one
// [agent.DeltaText], and the deltas concatenated are the answer exactly.
//
// Its [agent.Usage] counts words, not tokens (it has no tokenizer):
// InputTokens is the number of words of the system prompt and of every
// message of the request, OutputTokens the number of words of the answer,
// CachedInputTokens zero. A stand-in, so that usage accounting (metrics,
// per-run token limits) can be seen and tested offline.
type EchoModel struct{}

var (
	_ agent.Model    = EchoModel{}
	_ agent.Streamer = EchoModel{}
	_ agent.Offline  = EchoModel{}
)

// Generate implements [agent.Model].
func (EchoModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	return EchoModel{}.GenerateStream(ctx, req, nil)
}

// GenerateStream implements [agent.Streamer]: the answer of Generate, word
// by word. It checks ctx before every word.
func (EchoModel) GenerateStream(ctx context.Context, req *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var answer string
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == agent.RoleUser {
			answer = req.Messages[i].Content
			break
		}
	}
	in := words(req.System)
	for _, m := range req.Messages {
		in += words(m.Content)
	}
	res := &agent.Response{Content: answer, Usage: agent.Usage{InputTokens: in, OutputTokens: words(answer)}}
	if emit == nil {
		return res, nil
	}
	for rest := answer; rest != ""; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A word and the spaces after it (leading spaces go with the first).
		end := strings.IndexFunc(strings.TrimLeftFunc(rest, unicode.IsSpace), unicode.IsSpace)
		if end < 0 {
			end = len(rest)
		} else {
			end += len(rest) - len(strings.TrimLeftFunc(rest, unicode.IsSpace))
			end += len(rest[end:]) - len(strings.TrimLeftFunc(rest[end:], unicode.IsSpace))
		}
		emit(agent.Delta{Kind: agent.DeltaText, Text: rest[:end]})
		rest = rest[end:]
	}
	return res, nil
}

// words counts the words of s as strings.Fields cuts them.
func words(s string) int64 {
	var n int64
	in := false
	for _, r := range s {
		switch sp := unicode.IsSpace(r); {
		case !sp && !in:
			n++
			in = true
		case sp:
			in = false
		}
	}
	return n
}

// Offline implements [agent.Offline]: the echo model reaches nothing and calls
// no tools.
func (EchoModel) Offline() bool { return true }
