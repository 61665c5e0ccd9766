package main

/*
#include "focus.h"
*/
import "C"

import (
	"context"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/focus-go/focus-go/backends/chat"
	"github.com/focus-go/focus-go/backends/critic"
	"github.com/focus-go/focus-go/backends/server"
	"github.com/focus-go/focus-go/core/bridge"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/session"
	"github.com/focus-go/focus-go/core/status"
)

// A collection is a core/session.Session behind a handle: the exports below decode
// the session.Spec JSON, call the session and encode what it returns.

// handleParts resolves a Spec's native parts from the handle table (session.Resolver).
type handleParts struct{}

func (handleParts) Policy(h uint64) (collect.Policy, error) {
	return handleAs[*server.Policy](h, "policy")
}

func (handleParts) Codec(h uint64) (collect.Codec, error) {
	c, err := handleAs[*chat.Codec](h, "chat codec")
	if err != nil {
		return nil, err
	}
	return c.Tokenizer(), nil
}

func (handleParts) HTTPCritic(url string, timeout time.Duration) (collect.Critic, func(), error) {
	s, err := critic.HTTP(url, timeout)
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}

func (handleParts) Turns(h uint64, t session.Turn) (*collect.Turns, error) {
	c, err := handleAs[*chat.Codec](h, "chat codec")
	if err != nil {
		return nil, err
	}
	return c.Turns(t.Parser, t.Messages, t.Tools, t.TemplateKwargs)
}

//export focus_collect_start
func focus_collect_start(config *C.char, n C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var spec session.Spec
		if err := decodeJSON(config, n, "collection spec", &spec); err != nil {
			return err
		}
		s, err := session.Start(context.Background(), spec, handleParts{})
		if err != nil {
			return err
		}
		*out = C.focus_handle(handles.put(s))
		return nil
	})
}

func collectionOf(h C.focus_handle) (*session.Session, error) {
	return handleAs[*session.Session](uint64(h), "collection")
}

// polledRequest is a request as Python reads it: tokens is the [start, end) range of a
// policy.generate prefix in the poll's token array.
type polledRequest struct {
	bridge.Request
	Tokens *[2]int `json:"tokens,omitempty"`
}

// encodePolled is the JSON of polled requests ([]polledRequest's, written directly: the
// requests' payloads are the engine's own compact JSON, copied as they are) and the ids
// that travel beside it, every request's Tokens concatenated.
func encodePolled(reqs []bridge.Request) ([]byte, []uint32, error) {
	size, count := 2, 0
	for _, r := range reqs {
		size += 64 + len(r.Kind) + len(r.Payload)
		count += len(r.Tokens)
	}
	buf := make([]byte, 0, size)
	var ids []uint32
	if count > 0 {
		ids = make([]uint32, 0, count)
	}
	buf = append(buf, '[')
	for i, r := range reqs {
		if !plainKind(r.Kind) {
			return nil, nil, status.Errorf(status.Internal, "bridge request %d: kind %q is not a plain name", r.ID, r.Kind)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"id":`...)
		buf = strconv.AppendUint(buf, r.ID, 10)
		buf = append(buf, `,"kind":"`...)
		buf = append(buf, r.Kind...)
		buf = append(buf, `","object":`...)
		buf = strconv.AppendInt(buf, r.Object, 10)
		buf = append(buf, `,"payload":`...)
		if len(r.Payload) == 0 {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, r.Payload...)
		}
		if r.Tokens != nil {
			buf = append(buf, `,"tokens":[`...)
			buf = strconv.AppendInt(buf, int64(len(ids)), 10)
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, int64(len(ids)+len(r.Tokens)), 10)
			buf = append(buf, ']')
			ids = append(ids, r.Tokens...)
		}
		buf = append(buf, '}')
	}
	return append(buf, ']'), ids, nil
}

// plainKind reports whether a request kind needs no JSON escaping (they are core/bridge's
// constants: lower-case words and dots).
func plainKind(kind string) bool {
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; (c < 'a' || c > 'z') && c != '.' && c != '_' {
			return false
		}
	}
	return kind != ""
}

// focus_collection_poll takes up to max queued requests for Python (see core/bridge for
// the kinds), with the policy.generate prefixes concatenated in one array.
//
//export focus_collection_poll
func focus_collection_poll(h C.focus_handle, ticket C.uint64_t, timeoutMs C.int64_t, limit C.int32_t, out *C.focus_bytes, tokens **C.uint32_t, nTokens *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return run(ticket, errOut, func() (func(context.Context) error, error) {
		c, err := collectionOf(h)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			if timeoutMs >= 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
				defer cancel()
			}
			reqs, err := c.Poll(ctx, int(limit))
			if err != nil {
				return err
			}
			data, ids, err := encodePolled(reqs)
			if err != nil {
				return err
			}
			setBytes(out, data)
			cIDs(ids, tokens, nTokens)
			return nil
		}, nil
	})
}

//export focus_collection_resolve
func focus_collection_resolve(h C.focus_handle, id C.uint64_t, payload *C.char, n C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		return c.Resolve(uint64(id), append([]byte(nil), goBytes(payload, n)...))
	})
}

// focus_collection_resolve_generate answers a policy.generate request with its ids and
// logprobs as arrays beside the JSON rest of the result.
//
//export focus_collection_resolve_generate
func focus_collection_resolve_generate(h C.focus_handle, id C.uint64_t, tokens *C.uint32_t, logprobs *C.double, n C.size_t, payload *C.char, payloadLen C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		lps := []float64{}
		if n > 0 {
			lps = slices.Clone(unsafe.Slice((*float64)(unsafe.Pointer(logprobs)), int(n)))
		}
		return c.Answer(uint64(id), bridge.Reply{
			Payload:  append([]byte(nil), goBytes(payload, payloadLen)...),
			Tokens:   append([]uint32{}, goIDs(tokens, n)...),
			Logprobs: lps,
		})
	})
}

// focus_collection_answer answers n requests in one call, in order, as
// focus_collection_resolve and focus_collection_resolve_generate would one by one.
//
//export focus_collection_answer
func focus_collection_answer(h C.focus_handle, n C.size_t, ids *C.uint64_t, payload *C.char, payloadLen C.size_t,
	payloadEnds *C.uint64_t, generated *C.int64_t, tokens *C.uint32_t, logprobs *C.double, nTokens C.size_t,
	answered *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		if n > 0 && (ids == nil || payloadEnds == nil || generated == nil) {
			return status.Errorf(status.InvalidArgument, "focus_collection_answer: ids, payload_ends and generated must not be NULL for %d answers", n)
		}
		if nTokens > 0 && (tokens == nil || logprobs == nil) {
			return status.Errorf(status.InvalidArgument, "focus_collection_answer: tokens and logprobs must not be NULL for %d ids", nTokens)
		}
		count, err := answerBatch(c, cSlice((*uint64)(unsafe.Pointer(ids)), n), goBytes(payload, payloadLen),
			cSlice((*uint64)(unsafe.Pointer(payloadEnds)), n), cSlice((*int64)(unsafe.Pointer(generated)), n),
			goIDs(tokens, nTokens), cSlice((*float64)(unsafe.Pointer(logprobs)), nTokens))
		if answered != nil {
			*answered = C.size_t(count)
		}
		return err
	})
}

// cSlice is n values at p (nil when there are none), without copying.
func cSlice[T any](p *T, n C.size_t) []T {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice(p, int(n))
}

// answerer is what answerBatch answers through (a *session.Session).
type answerer interface {
	Resolve(id uint64, payload []byte) error
	Answer(id uint64, reply bridge.Reply) error
}

// answerBatch decodes focus_collection_answer's arrays (checked whole before any answer is
// given) and answers each request in turn: answer i's JSON is payload[ends[i-1]:ends[i]];
// generated[i] is -1 for a JSON-only answer, else the number of ids and logprobs it takes
// next from tokens and logprobs. A request the engine no longer waits for (an
// InvalidHandle error, as focus_collection_resolve reports) is skipped; it returns how many
// were answered.
func answerBatch(c answerer, ids []uint64, payload []byte, ends []uint64, generated []int64, tokens []uint32, logprobs []float64) (int, error) {
	if len(ends) != len(ids) || len(generated) != len(ids) {
		return 0, status.Errorf(status.InvalidArgument, "focus_collection_answer: %d ids but %d payload ends and %d generated counts", len(ids), len(ends), len(generated))
	}
	if len(logprobs) != len(tokens) {
		return 0, status.Errorf(status.InvalidArgument, "focus_collection_answer: %d ids but %d logprobs", len(tokens), len(logprobs))
	}
	var prev uint64
	total := 0
	for i := range ids {
		if ends[i] < prev || ends[i] > uint64(len(payload)) {
			return 0, status.Errorf(status.InvalidArgument, "focus_collection_answer: answer %d: payload end %d is outside [%d, %d] (payload_ends must be non-decreasing offsets into the %d-byte payload)", i, ends[i], prev, len(payload), len(payload))
		}
		prev = ends[i]
		if generated[i] < -1 || generated[i] > int64(len(tokens)-total) {
			return 0, status.Errorf(status.InvalidArgument, "focus_collection_answer: answer %d: generated count %d, expected -1 (a JSON answer) or at most the %d ids left of %d", i, generated[i], len(tokens)-total, len(tokens))
		}
		total += max(int(generated[i]), 0)
	}
	if total != len(tokens) {
		return 0, status.Errorf(status.InvalidArgument, "focus_collection_answer: the answers take %d ids but %d were given", total, len(tokens))
	}
	answered, start, at := 0, uint64(0), 0
	for i, id := range ids {
		body := append([]byte(nil), payload[start:ends[i]]...)
		start = ends[i]
		var err error
		if k := int(generated[i]); k >= 0 {
			err = c.Answer(id, bridge.Reply{Payload: body, Tokens: append([]uint32{}, tokens[at:at+k]...), Logprobs: append([]float64{}, logprobs[at:at+k]...)})
			at += k
		} else {
			err = c.Resolve(id, body)
		}
		switch {
		case err == nil:
			answered++
		case status.CodeOf(err) != status.InvalidHandle:
			return answered, status.Wrap(status.CodeOf(err), err, "focus_collection_answer: answer %d (request %d)", i, id)
		}
	}
	return answered, nil
}

//export focus_collection_fail
func focus_collection_fail(h C.focus_handle, id C.uint64_t, code C.int32_t, message *C.char, messageLen C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		return c.Fail(uint64(id), status.Code(code), goString(message, messageLen))
	})
}

//export focus_collection_cancel
func focus_collection_cancel(h C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		c.Cancel()
		return nil
	})
}

// focus_collection_wait waits until the collection ends or timeout_ms passes (negative: no
// limit); *done says which.
//
//export focus_collection_wait
func focus_collection_wait(h C.focus_handle, ticket C.uint64_t, timeoutMs C.int64_t, done *C.int32_t, errOut *C.focus_bytes) C.focus_status {
	return run(ticket, errOut, func() (func(context.Context) error, error) {
		c, err := collectionOf(h)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			timeout := time.Duration(timeoutMs) * time.Millisecond
			if timeoutMs < 0 {
				timeout = -1
			}
			ended, err := c.Wait(ctx, timeout)
			*done = 0
			if ended {
				*done = 1
			}
			return err
		}, nil
	})
}

// focus_collection_progress encodes the collection's live counters
// (session.Session.Progress, a collect.ProgressSnapshot) as *out JSON.
//
//export focus_collection_progress
func focus_collection_progress(h C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		return returnJSON(out, c.Progress())
	})
}

// focus_collection_result hands over the finished collection's tree (a new tree handle, 0
// if none) and *out = {"code", "message", "field" (only when the error is about a
// configuration field), "failures": [{"node_id", "message"}]}; code is the collection's
// status (0 = complete).
//
//export focus_collection_result
func focus_collection_result(h C.focus_handle, treeOut *C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		o, err := c.Result()
		if err != nil {
			return err
		}
		*treeOut = 0
		if o.Tree != nil {
			*treeOut = C.focus_handle(handles.put(o.Tree))
		}
		msg := ""
		if o.Err != nil {
			msg = o.Err.Error()
		}
		failures := o.Failures
		if failures == nil {
			failures = []collect.Failure{}
		}
		outcome := map[string]any{"code": status.CodeOf(o.Err), "message": msg, "failures": failures}
		if field := status.FieldOf(o.Err); field != "" {
			outcome["field"] = field
		}
		return returnJSON(out, outcome)
	})
}
