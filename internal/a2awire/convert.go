package a2awire

// Conversions between the A2A 0.3 types (the 0.3 SDK's a2a package) and
// the 1.0 ones, as a2a-go/v2's a2acompat/a2av0 converts them (a port of
// its conversions.go of v2.4.0, Copyright 2026 The A2A Authors, Apache
// License 2.0): that package would bring the 0.3 SDK's servers, gRPC and
// protobuf into every binary that uses the module. One difference: a nil
// 1.0 part is dropped (a2av0 panics on it).

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
)

// taskStates pairs each task state's 0.3 and 1.0 names, for both
// directions of the mapping.
var taskStates = [...]struct {
	v03 a2a03.TaskState
	v1  a2a1.TaskState
}{
	{a2a03.TaskStateSubmitted, a2a1.TaskStateSubmitted},
	{a2a03.TaskStateWorking, a2a1.TaskStateWorking},
	{a2a03.TaskStateCompleted, a2a1.TaskStateCompleted},
	{a2a03.TaskStateCanceled, a2a1.TaskStateCanceled},
	{a2a03.TaskStateFailed, a2a1.TaskStateFailed},
	{a2a03.TaskStateRejected, a2a1.TaskStateRejected},
	{a2a03.TaskStateInputRequired, a2a1.TaskStateInputRequired},
	{a2a03.TaskStateAuthRequired, a2a1.TaskStateAuthRequired},
}

// State1 is the 1.0 name of a 0.3 task state (unspecified for another).
func State1(s a2a03.TaskState) a2a1.TaskState {
	for _, p := range taskStates {
		if p.v03 == s {
			return p.v1
		}
	}
	return a2a1.TaskStateUnspecified
}

// State03 is the 0.3 name of a 1.0 task state (unspecified for another).
func State03(s a2a1.TaskState) a2a03.TaskState {
	for _, p := range taskStates {
		if p.v1 == s {
			return p.v03
		}
	}
	return a2a03.TaskStateUnspecified
}

func role1(r a2a03.MessageRole) a2a1.MessageRole {
	switch r {
	case a2a03.MessageRoleAgent:
		return a2a1.MessageRoleAgent
	case a2a03.MessageRoleUser:
		return a2a1.MessageRoleUser
	}
	return a2a1.MessageRoleUnspecified
}

func role03(r a2a1.MessageRole) a2a03.MessageRole {
	switch r {
	case a2a1.MessageRoleAgent:
		return a2a03.MessageRoleAgent
	case a2a1.MessageRoleUser:
		return a2a03.MessageRoleUser
	}
	return a2a03.MessageRoleUnspecified
}

// Event1 is a 0.3 event as the 1.0 event.
func Event1(ev a2a03.Event) (a2a1.Event, error) {
	switch v := ev.(type) {
	case *a2a03.Message:
		return Message1(v), nil
	case *a2a03.Task:
		return Task1(v)
	case *a2a03.TaskStatusUpdateEvent:
		return &a2a1.TaskStatusUpdateEvent{
			ContextID: v.ContextID,
			Status:    status1(v.Status),
			TaskID:    a2a1.TaskID(v.TaskID),
			Metadata:  v.Metadata,
		}, nil
	case *a2a03.TaskArtifactUpdateEvent:
		return &a2a1.TaskArtifactUpdateEvent{
			Append:    v.Append,
			Artifact:  artifact1(v.Artifact),
			ContextID: v.ContextID,
			LastChunk: v.LastChunk,
			TaskID:    a2a1.TaskID(v.TaskID),
			Metadata:  v.Metadata,
		}, nil
	default:
		return nil, fmt.Errorf("unknown A2A 0.3 event %T", ev)
	}
}

func status1(s a2a03.TaskStatus) a2a1.TaskStatus {
	return a2a1.TaskStatus{Message: Message1(s.Message), State: State1(s.State), Timestamp: s.Timestamp}
}

// Task1 is a 0.3 task as the 1.0 task; a nil one is an error.
func Task1(t *a2a03.Task) (*a2a1.Task, error) {
	if t == nil {
		return nil, errors.New("the result is a null task")
	}
	res := &a2a1.Task{
		ID:        a2a1.TaskID(t.ID),
		ContextID: t.ContextID,
		Metadata:  t.Metadata,
		Status:    status1(t.Status),
	}
	if len(t.Artifacts) > 0 {
		res.Artifacts = make([]*a2a1.Artifact, len(t.Artifacts))
		for i, a := range t.Artifacts {
			res.Artifacts[i] = artifact1(a)
		}
	}
	if len(t.History) > 0 {
		res.History = make([]*a2a1.Message, len(t.History))
		for i, m := range t.History {
			res.History[i] = Message1(m)
		}
	}
	return res, nil
}

// Message1 is a 0.3 message as the 1.0 message (nil for nil).
func Message1(m *a2a03.Message) *a2a1.Message {
	if m == nil {
		return nil
	}
	var refs []a2a1.TaskID
	if m.ReferenceTasks != nil {
		refs = make([]a2a1.TaskID, len(m.ReferenceTasks))
		for i, id := range m.ReferenceTasks {
			refs[i] = a2a1.TaskID(id)
		}
	}
	return &a2a1.Message{
		ID:             m.ID,
		ContextID:      m.ContextID,
		Extensions:     m.Extensions,
		Metadata:       m.Metadata,
		Parts:          parts1(m.Parts),
		ReferenceTasks: refs,
		Role:           role1(m.Role),
		TaskID:         a2a1.TaskID(m.TaskID),
	}
}

func artifact1(a *a2a03.Artifact) *a2a1.Artifact {
	if a == nil {
		return nil
	}
	return &a2a1.Artifact{
		ID:          a2a1.ArtifactID(a.ID),
		Description: a.Description,
		Extensions:  a.Extensions,
		Metadata:    a.Metadata,
		Name:        a.Name,
		Parts:       parts1(a.Parts),
	}
}

func parts1(parts a2a03.ContentParts) a2a1.ContentParts {
	if len(parts) == 0 {
		return nil
	}
	res := make(a2a1.ContentParts, len(parts))
	for i, p := range parts {
		res[i] = part1(p)
	}
	return res
}

// part1 is a2av0.ToV1Part: data that Part03 wrapped (metadata
// data_part_compat) is unwrapped, file bytes that are not base64 are kept
// as they are (a2av0 logs a warning), a part of an unknown kind becomes
// data.
func part1(p a2a03.Part) *a2a1.Part {
	switch c := p.(type) {
	case a2a03.TextPart:
		return &a2a1.Part{Content: a2a1.Text(c.Text), Metadata: c.Metadata}
	case a2a03.DataPart:
		var val any = c.Data
		metadata := maps.Clone(c.Metadata)
		if compat, ok := metadata["data_part_compat"].(bool); ok && compat {
			val = c.Data["value"]
			delete(metadata, "data_part_compat")
		}
		return &a2a1.Part{Content: a2a1.Data{Value: val}, Metadata: metadata}
	case a2a03.FilePart:
		switch f := c.File.(type) {
		case a2a03.FileBytes:
			b, err := base64.StdEncoding.DecodeString(f.Bytes)
			if err != nil {
				b = []byte(f.Bytes)
			}
			return &a2a1.Part{Content: a2a1.Raw(b), Metadata: c.Metadata, MediaType: f.MimeType, Filename: f.Name}
		case a2a03.FileURI:
			return &a2a1.Part{Content: a2a1.URL(f.URI), Metadata: c.Metadata, MediaType: f.MimeType, Filename: f.Name}
		default:
			return &a2a1.Part{Content: a2a1.Data{Value: f}, Metadata: c.Metadata}
		}
	case nil:
		return nil
	default:
		return &a2a1.Part{Content: a2a1.Data{Value: c}, Metadata: p.Meta()}
	}
}

// Message03 is a 1.0 message as the 0.3 message (nil for nil).
func Message03(m *a2a1.Message) *a2a03.Message {
	if m == nil {
		return nil
	}
	var refs []a2a03.TaskID
	if m.ReferenceTasks != nil {
		refs = make([]a2a03.TaskID, len(m.ReferenceTasks))
		for i, id := range m.ReferenceTasks {
			refs[i] = a2a03.TaskID(id)
		}
	}
	var parts a2a03.ContentParts
	if len(m.Parts) > 0 {
		parts = make(a2a03.ContentParts, 0, len(m.Parts))
		for _, p := range m.Parts {
			if p != nil {
				parts = append(parts, part03(p))
			}
		}
	}
	return &a2a03.Message{
		ID:             m.ID,
		ContextID:      m.ContextID,
		Extensions:     m.Extensions,
		Metadata:       m.Metadata,
		Parts:          parts,
		ReferenceTasks: refs,
		Role:           role03(m.Role),
		TaskID:         a2a03.TaskID(m.TaskID),
	}
}

// part03 is a2av0.FromV1Part: data that is not an object (0.3 data parts
// are objects) travels wrapped as {"value": …} with metadata
// data_part_compat, which part1 unwraps.
func part03(p *a2a1.Part) a2a03.Part {
	switch c := p.Content.(type) {
	case a2a1.Text:
		return a2a03.TextPart{Text: string(c), Metadata: p.Metadata}
	case a2a1.Data:
		val := c.Value
		metadata := maps.Clone(p.Metadata)
		obj, ok := val.(map[string]any)
		if !ok {
			obj = map[string]any{"value": val}
			if metadata == nil {
				metadata = make(map[string]any)
			}
			metadata["data_part_compat"] = true
		}
		return a2a03.DataPart{Data: obj, Metadata: metadata}
	case a2a1.Raw:
		return a2a03.FilePart{
			File:     a2a03.FileBytes{FileMeta: a2a03.FileMeta{MimeType: p.MediaType, Name: p.Filename}, Bytes: base64.StdEncoding.EncodeToString(c)},
			Metadata: p.Metadata,
		}
	case a2a1.URL:
		return a2a03.FilePart{
			File:     a2a03.FileURI{FileMeta: a2a03.FileMeta{MimeType: p.MediaType, Name: p.Filename}, URI: string(c)},
			Metadata: p.Metadata,
		}
	default:
		return a2a03.DataPart{Data: map[string]any{"value": p}, Metadata: p.Metadata}
	}
}

// SendParams03 is a 1.0 SendMessage request as 0.3 message/send params.
func SendParams03(req *a2a1.SendMessageRequest) *a2a03.MessageSendParams {
	res := &a2a03.MessageSendParams{Message: Message03(req.Message), Metadata: req.Metadata}
	if c := req.Config; c != nil {
		blocking := !c.ReturnImmediately
		res.Config = &a2a03.MessageSendConfig{
			AcceptedOutputModes: c.AcceptedOutputModes,
			HistoryLength:       c.HistoryLength,
			Blocking:            &blocking,
		}
		if pc := c.PushConfig; pc != nil {
			res.Config.PushConfig = &a2a03.PushConfig{ID: pc.ID, Token: pc.Token, URL: pc.URL}
			if pc.Auth != nil {
				res.Config.PushConfig.Auth = &a2a03.PushAuthInfo{Credentials: pc.Auth.Credentials, Schemes: []string{pc.Auth.Scheme}}
			}
		}
	}
	return res
}
