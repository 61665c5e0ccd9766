package main

/*
#include "focus.h"
*/
import "C"

import (
	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/backends/parse"
	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/action"
)

var jsonAPI = jsoniter.ConfigCompatibleWithStandardLibrary

type (
	wireToolCall     = binding.ToolCall
	wireParseRequest = binding.ParseRequest
)

type wireToolTurn struct {
	Text      string         `json:"text"`
	ToolCalls []wireToolCall `json:"tool_calls"`
	Reasoning string         `json:"reasoning"`
}

type wireAction struct {
	Kind  action.Kind   `json:"kind"`
	Text  string        `json:"text,omitempty"`
	Turn  *wireToolTurn `json:"tool_turn,omitempty"`
	Chunk *struct {
		Tokens   []uint32 `json:"tokens"`
		Finished bool     `json:"finished"`
	} `json:"chunk,omitempty"`
}

func toWireTurn(t action.ToolTurn) *wireToolTurn {
	calls := make([]wireToolCall, len(t.ToolCalls))
	for i, c := range t.ToolCalls {
		calls[i] = wireToolCall{Name: c.Name, Arguments: c.Arguments, CallID: c.CallID, Error: c.Error}
	}
	return &wireToolTurn{Text: t.Text, ToolCalls: calls, Reasoning: t.Reasoning}
}

// decodeJSON reads a caller-owned JSON payload, the input named what, into v: strictly,
// an unknown key is an error naming it and the keys allowed (binding.Decode).
func decodeJSON(data *C.char, n C.size_t, what string, v any) error {
	return binding.Decode(what, goBytes(data, n), v)
}

// returnJSON encodes v as JSON into a focus_bytes for the caller.
func returnJSON(out *C.focus_bytes, v any) error {
	data, err := jsonAPI.Marshal(v)
	if err != nil {
		return err
	}
	setBytes(out, data)
	return nil
}

//export focus_parse
func focus_parse(profile *C.char, profileLen C.size_t, request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var req wireParseRequest
		if err := decodeJSON(request, n, "parse request", &req); err != nil {
			return err
		}
		parser, err := parse.ForProfile(goString(profile, profileLen), req.Tools)
		if err != nil {
			return err
		}
		r := action.Result{Tokens: req.Result.Tokens, Text: req.Result.Text, StopReason: req.Result.StopReason}
		for _, c := range req.Result.NativeToolCalls {
			r.NativeToolCalls = append(r.NativeToolCalls, action.ToolCall{Name: c.Name, Arguments: c.Arguments, CallID: c.CallID})
		}
		act, err := parser.Parse(r)
		if err != nil {
			return err
		}
		w := wireAction{Kind: act.Kind, Text: act.Text}
		if act.Turn != nil {
			w.Turn = toWireTurn(*act.Turn)
		}
		if act.Chunk != nil {
			w.Chunk = &struct {
				Tokens   []uint32 `json:"tokens"`
				Finished bool     `json:"finished"`
			}{act.Chunk.Tokens, act.Chunk.Finished}
		}
		return returnJSON(out, w)
	})
}

//export focus_tool_blocks
func focus_tool_blocks(text *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var blocks []string
		turn := parse.BuildToolTurn(string(goBytes(text, n)), func(block string) action.ToolCall {
			blocks = append(blocks, block)
			return action.ToolCall{}
		})
		return returnJSON(out, struct {
			Text      string   `json:"text"`
			Reasoning string   `json:"reasoning"`
			Blocks    []string `json:"blocks"`
		}{turn.Text, turn.Reasoning, blocks})
	})
}

//export focus_profile_resolve
func focus_profile_resolve(request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var req binding.ProfileRequest
		if err := decodeJSON(request, n, "profile request", &req); err != nil {
			return err
		}
		family, err := parse.FamilyFor(req.Model, req.ChatTemplate)
		if err != nil {
			return err
		}
		named, _ := parse.FamilyByName(req.Model)
		return returnJSON(out, struct {
			Family      string `json:"family"`
			Profile     string `json:"profile"`
			NamedFamily string `json:"named_family"` // the family the name alone names ("" for none)
		}{family.Name, family.Profile, named.Name})
	})
}
