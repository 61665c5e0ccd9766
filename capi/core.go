package main

/*
#include <stdlib.h>
#include <string.h>
#include "focus.h"
*/
import "C"

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

func treeOf(h C.focus_handle) (*tree.Tree, error) {
	return handleAs[*tree.Tree](uint64(h), "tree")
}

func batchOf(h C.focus_handle) (*prepare.Batch, error) {
	return handleAs[*prepare.Batch](uint64(h), "batch")
}

// treeValues resolves a tree handle and computes its values under the given reward config.
func treeValues(h C.focus_handle, reward *C.char, n C.size_t) (*tree.Tree, *prepare.TreeValues, error) {
	t, err := treeOf(h)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := rewardConfig(reward, n)
	if err != nil {
		return nil, nil, err
	}
	v, err := prepare.Values(t, cfg)
	return t, v, err
}

// optionalBatch resolves a batch handle where 0 means "no batch".
func optionalBatch(h C.focus_handle) (*prepare.Batch, error) {
	if h == 0 {
		return nil, nil
	}
	return batchOf(h)
}

func rewardConfig(data *C.char, n C.size_t) (prepare.RewardConfig, error) {
	cfg := prepare.DefaultRewardConfig()
	if n == 0 {
		return cfg, nil
	}
	err := decodeJSON(data, n, "reward config", &cfg)
	return cfg, err
}

//export focus_tree_from_json
func focus_tree_from_json(data *C.char, n C.size_t, out *C.focus_handle, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		t, err := tree.Unmarshal(goBytes(data, n))
		if err != nil {
			return err
		}
		*out = C.focus_handle(handles.put(t))
		return nil
	})
}

//export focus_tree_to_json
func focus_tree_to_json(h C.focus_handle, out **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		t, err := treeOf(h)
		if err != nil {
			return err
		}
		data, err := tree.Marshal(t)
		if err != nil {
			return err
		}
		*out = C.CString(string(data))
		return nil
	})
}

type wireValues struct {
	Backup  map[int]float64 `json:"backup"`
	Refined map[int]float64 `json:"refined"`
	Count   map[int]int     `json:"count"`
}

//export focus_tree_values
func focus_tree_values(h C.focus_handle, reward *C.char, n C.size_t, out **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		t, v, err := treeValues(h, reward, n)
		if err != nil {
			return err
		}
		w := wireValues{Backup: map[int]float64{}, Refined: map[int]float64{}, Count: map[int]int{}}
		for id := range t.Nodes {
			if v.HasBackup(id) {
				w.Backup[id] = v.Backup[id]
			}
			if v.HasRefined(id) {
				w.Refined[id] = v.Refined[id]
			}
			if !v.Excluded[id] {
				w.Count[id] = v.Count[id]
			}
		}
		return returnJSON(out, w)
	})
}

//export focus_critic_targets
func focus_critic_targets(h C.focus_handle, reward *C.char, n C.size_t, out **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		_, v, err := treeValues(h, reward, n)
		if err != nil {
			return err
		}
		return returnJSON(out, prepare.CriticTargets(v))
	})
}

// wireActor describes a prepared actor sample without its spans (fetched on demand).
type wireActor struct {
	prepare.ActorSample
	NumSpans   int `json:"num_spans"`
	EdgeTokens int `json:"edge_tokens"`
}

func batchSummary(b *prepare.Batch) map[string]any {
	actor := make([]wireActor, len(b.Actor))
	for i := range b.Actor {
		actor[i] = wireActor{b.Actor[i], b.Actor[i].NumSpans(), b.Actor[i].EdgeTokens()}
	}
	return map[string]any{"problem_id": b.ProblemID, "actor": actor, "critic": b.Critic,
		"reward_config": b.RewardConfig, "stats": b.Stats, "failures": b.Failures}
}

//export focus_prepare
func focus_prepare(h C.focus_handle, reward *C.char, n C.size_t, estimator *C.char, out *C.focus_handle, summary **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		t, err := treeOf(h)
		if err != nil {
			return err
		}
		cfg, err := rewardConfig(reward, n)
		if err != nil {
			return err
		}
		est, err := prepare.EstimatorByName(C.GoString(estimator))
		if err != nil {
			return err
		}
		b, err := prepare.Prepare(t, cfg, est)
		if err != nil {
			return err
		}
		if err := returnJSON(summary, batchSummary(b)); err != nil {
			return err
		}
		*out = C.focus_handle(handles.put(b))
		return nil
	})
}

type wireSpan struct {
	Tokens    []uint32  `json:"tokens"`
	Trainable []bool    `json:"trainable"`
	Logprobs  []float64 `json:"logprobs"`
}

type wireBatch struct {
	ProblemID string `json:"problem_id"`
	Actor     []struct {
		NodeID      int                 `json:"node_id"`
		GroupID     int                 `json:"group_id"`
		Estimator   string              `json:"estimator"`
		Weight      float64             `json:"weight"`
		Diagnostics prepare.Diagnostics `json:"diagnostics"`
		SearchPass  *int                `json:"search_pass"`
		Spans       []wireSpan          `json:"spans"`
	} `json:"actor"`
	Critic   []prepare.CriticSample `json:"critic"`
	Failures []prepare.Failure      `json:"failures"`
}

// focus_batch_from_json builds a batch from records a Python caller made itself
// (Batch(actor=(ActorSample(...),)) with explicit spans).
//
//export focus_batch_from_json
func focus_batch_from_json(data *C.char, n C.size_t, out *C.focus_handle, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		var w wireBatch
		if err := decodeJSON(data, n, "batch", &w); err != nil {
			return err
		}
		b := &prepare.Batch{ProblemID: w.ProblemID, Critic: w.Critic, Failures: w.Failures}
		for i, a := range w.Actor {
			spans := make([]tree.PackedSequence, len(a.Spans))
			for k, s := range a.Spans {
				if len(s.Trainable) != len(s.Tokens) || len(s.Logprobs) != len(s.Tokens) {
					return status.Errorf(status.InvalidArgument,
						"batch: actor sample %d span %d has %d tokens, %d trainable flags and %d logprobs; they must be equal",
						i, k, len(s.Tokens), len(s.Trainable), len(s.Logprobs))
				}
				spans[k] = tree.PackedSequence{Tokens: s.Tokens, Trainable: s.Trainable, Logprobs: s.Logprobs}
			}
			sample := prepare.NewActorSample(a.NodeID, a.GroupID, a.Estimator, a.Weight, spans)
			sample.Diagnostics = a.Diagnostics
			if a.SearchPass != nil {
				sample.SearchPass = *a.SearchPass
			}
			b.Actor = append(b.Actor, sample)
		}
		*out = C.focus_handle(handles.put(b))
		return nil
	})
}

//export focus_batch_spans
func focus_batch_spans(h C.focus_handle, sample C.int64_t, out **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		if sample < 0 || int(sample) >= len(b.Actor) {
			return status.Errorf(status.InvalidArgument, "batch: actor sample %d out of range [0, %d)", sample, len(b.Actor))
		}
		spans := b.Actor[sample].Spans()
		w := make([]wireSpan, len(spans))
		for i, s := range spans {
			w[i] = wireSpan{s.Tokens, s.Trainable, s.Logprobs}
		}
		return returnJSON(out, w)
	})
}

//export focus_batch_text
func focus_batch_text(h C.focus_handle, kind *C.char, out **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		switch k := C.GoString(kind); k {
		case "describe":
			*out = C.CString(export.Describe(b))
		case "edges":
			*out = C.CString(export.FormatEdges(b))
		default:
			return status.Errorf(status.InvalidArgument, "batch text: unknown kind %q, expected describe or edges", k)
		}
		return nil
	})
}

//export focus_format_tree
func focus_format_tree(h C.focus_handle, batch C.focus_handle, out **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		t, err := treeOf(h)
		if err != nil {
			return err
		}
		b, err := optionalBatch(batch)
		if err != nil {
			return err
		}
		*out = C.CString(export.FormatTree(t, b))
		return nil
	})
}

//export focus_tree_html
func focus_tree_html(h C.focus_handle, reward *C.char, n C.size_t, batch C.focus_handle, out **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		t, v, err := treeValues(h, reward, n)
		if err != nil {
			return err
		}
		b, err := optionalBatch(batch)
		if err != nil {
			return err
		}
		var buf strings.Builder
		if err := export.WriteHTML(&buf, t, v, b); err != nil {
			return err
		}
		*out = C.CString(buf.String())
		return nil
	})
}

// The export blob: every column of an export.Flat in one C allocation, each section
// 8-byte aligned; the JSON layout names each section's byte offset and element count.
// Sections are planned first and written straight into the C buffer (no Go-side copy).
type blobSection struct {
	Offset int `json:"offset"`
	Count  int `json:"count"`
}

type blobPart struct {
	name     string
	count    int
	elemSize int
	write    func(dst []byte)
}

type blobWriter struct{ parts []blobPart }

func (w *blobWriter) add(name string, count, elemSize int, write func(dst []byte)) {
	w.parts = append(w.parts, blobPart{name, count, elemSize, write})
}

// build allocates the C buffer (freed with focus_buffer_free), writes every section and
// returns the layout.
func (w *blobWriter) build() (unsafe.Pointer, int, map[string]blobSection) {
	layout := make(map[string]blobSection, len(w.parts))
	size := 0
	for _, p := range w.parts {
		size = (size + 7) &^ 7
		layout[p.name] = blobSection{size, p.count}
		size += p.count * p.elemSize
	}
	mem := C.malloc(C.size_t(size) + 1) // +1: malloc(0) may return NULL
	buf := unsafe.Slice((*byte)(mem), size+1)
	for _, p := range w.parts {
		off := layout[p.name].Offset
		p.write(buf[off : off+p.count*p.elemSize])
	}
	return mem, size, layout
}

func putU32s(w *blobWriter, name string, v []uint32) {
	w.add(name, len(v), 4, func(d []byte) {
		for i, x := range v {
			binary.LittleEndian.PutUint32(d[4*i:], x)
		}
	})
}

func putI64s(w *blobWriter, name string, v []int64) {
	w.add(name, len(v), 8, func(d []byte) {
		for i, x := range v {
			binary.LittleEndian.PutUint64(d[8*i:], uint64(x))
		}
	})
}

func putI32s(w *blobWriter, name string, v []int32) {
	w.add(name, len(v), 4, func(d []byte) {
		for i, x := range v {
			binary.LittleEndian.PutUint32(d[4*i:], uint32(x))
		}
	})
}

func putF64s(w *blobWriter, name string, v []float64) {
	w.add(name, len(v), 8, func(d []byte) {
		for i, x := range v {
			binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(x))
		}
	})
}

func putBools(w *blobWriter, name string, v []bool) {
	w.add(name, len(v), 1, func(d []byte) {
		for i, x := range v {
			d[i] = 0
			if x {
				d[i] = 1
			}
		}
	})
}

func putBytes(w *blobWriter, name string, v []byte) {
	w.add(name, len(v), 1, func(d []byte) { copy(d, v) })
}

//export focus_batch_export
func focus_batch_export(h C.focus_handle, groupIndex C.int64_t, minAbs C.double, layout **C.char,
	blob *unsafe.Pointer, size *C.size_t, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		f, err := export.Encode(b, int(groupIndex), export.Options{MinAbsAdvantage: float64(minAbs)})
		if err != nil {
			return err
		}
		w := &blobWriter{}
		a, c := &f.Actor, &f.Critic
		base, deltaOffsets, delta := deltaTokens(b, a)
		putI64s(w, "base", base)
		putI64s(w, "delta_offsets", deltaOffsets)
		putU32s(w, "delta_tokens", delta)
		putI64s(w, "span_start", a.SpanStart)
		putI64s(w, "span_offsets", a.SpanOffsets)
		putBools(w, "span_mask", a.SpanMask)
		putF64s(w, "span_logprobs", a.SpanLogprobs)
		putF64s(w, "advantage", a.Advantage)
		putI64s(w, "node_id", a.NodeID)
		putI64s(w, "search_pass", a.SearchPass)
		putI32s(w, "estimator", a.Estimator)
		putI64s(w, "critic_offsets", c.Offsets)
		putBytes(w, "critic_context", c.Context)
		putF64s(w, "critic_target", c.Target)
		putI64s(w, "critic_node_id", c.NodeID)
		mem, n, sections := w.build()
		if err := returnJSON(layout, map[string]any{"problem_id": f.ProblemID, "group_index": f.GroupIndex,
			"estimators": f.Estimators, "n_actor": f.NumActor(), "n_critic": f.NumCritic(), "sections": sections}); err != nil {
			C.free(mem)
			return err
		}
		*blob, *size = mem, C.size_t(n)
		return nil
	})
}

// deltaTokens re-encodes the actor records' tokens against earlier records: record i's
// tokens are record base[i]'s tokens (nothing when base[i] is -1) followed by
// delta[offsets[i]:offsets[i+1]]. A record's context is nearly always the tokens of the
// record before it on its path (the parent edge's last span, or the sample's previous
// span), so the tree's tokens cross the boundary once instead of once per descendant, and
// Python builds each token list by extending a list it already holds (sharing its int
// objects) instead of converting the whole context again. A candidate base is used only
// when its tokens really are a prefix of the record's, so any batch (filtered by
// min_abs_advantage, or made from Python samples) decodes to exactly its records.
func deltaTokens(b *prepare.Batch, a *export.ActorColumns) (base, offsets []int64, delta []uint32) {
	n := len(a.Advantage)
	base = make([]int64, n)
	skip := make([]int, n)
	last := make(map[int64]int, n) // node id -> its last record so far
	size := 0
	for i := range n {
		tokens := a.Tokens[a.Offsets[i]:a.Offsets[i+1]]
		cand := -1
		if i > 0 && a.Sample[i-1] == a.Sample[i] {
			cand = i - 1
		} else if j, ok := last[int64(b.Actor[a.Sample[i]].GroupID)]; ok {
			cand = j
		}
		base[i] = -1
		if cand >= 0 {
			prev := a.Tokens[a.Offsets[cand]:a.Offsets[cand+1]]
			if len(prev) <= len(tokens) && slices.Equal(prev, tokens[:len(prev)]) {
				base[i], skip[i] = int64(cand), len(prev)
			}
		}
		last[a.NodeID[i]] = i
		size += len(tokens) - skip[i]
	}
	offsets = make([]int64, 1, n+1)
	delta = make([]uint32, 0, size)
	for i := range n {
		delta = append(delta, a.Tokens[a.Offsets[i]+int64(skip[i]):a.Offsets[i+1]]...)
		offsets = append(offsets, int64(len(delta)))
	}
	return base, offsets, delta
}
