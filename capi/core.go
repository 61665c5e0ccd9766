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
func focus_tree_from_json(data *C.char, n C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
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
func focus_tree_to_json(h C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		t, err := treeOf(h)
		if err != nil {
			return err
		}
		data, err := tree.Marshal(t)
		if err != nil {
			return err
		}
		setBytes(out, data)
		return nil
	})
}

// focus_tree_summary describes a tree without its nodes: {"problem_id", "nodes", "stats"}.
//
//export focus_tree_summary
func focus_tree_summary(h C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		t, err := treeOf(h)
		if err != nil {
			return err
		}
		return returnJSON(out, map[string]any{"problem_id": t.ProblemID, "nodes": len(t.Nodes), "stats": t.Stats})
	})
}

type wireValues struct {
	Backup  map[int]float64 `json:"backup"`
	Refined map[int]float64 `json:"refined"`
	Count   map[int]int     `json:"count"`
}

//export focus_tree_values
func focus_tree_values(h C.focus_handle, reward *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
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
func focus_critic_targets(h C.focus_handle, reward *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		_, v, err := treeValues(h, reward, n)
		if err != nil {
			return err
		}
		return returnJSON(out, prepare.CriticTargets(v))
	})
}

// batchSummary is a batch's metadata; its samples cross as columns
// (focus_batch_columns).
func batchSummary(b *prepare.Batch) map[string]any {
	return map[string]any{"problem_id": b.ProblemID, "reward_config": b.RewardConfig, "stats": b.Stats,
		"failures": b.Failures, "n_actor": len(b.Actor), "n_critic": len(b.Critic)}
}

//export focus_prepare
func focus_prepare(h C.focus_handle, reward *C.char, n C.size_t, estimator *C.char, estimatorLen C.size_t, out *C.focus_handle, summary *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		t, err := treeOf(h)
		if err != nil {
			return err
		}
		cfg, err := rewardConfig(reward, n)
		if err != nil {
			return err
		}
		est, err := prepare.EstimatorByName(goString(estimator, estimatorLen))
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

// focus_batch_columns writes a batch's samples column-wise into one C buffer:
// per actor sample its node id, group id, weight, search pass, estimator index
// and diagnostics row; per critic sample its node id, target and diagnostics
// row. Diagnostic names cross once in the layout, so every sample's
// diagnostics must have the same names as the first sample's (always true of
// a prepared batch).
//
//export focus_batch_columns
func focus_batch_columns(h C.focus_handle, layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		w, meta, err := batchColumns(b)
		if err != nil {
			return err
		}
		return returnBlob(w, layout, blob, size, meta)
	})
}

// batchColumns plans focus_batch_columns' buffer and layout metadata.
func batchColumns(b *prepare.Batch) (*blobWriter, map[string]any, error) {
	na, nc := len(b.Actor), len(b.Critic)
	var actorDiag, criticDiag prepare.Diagnostics
	if na > 0 {
		actorDiag = b.Actor[0].Diagnostics
	}
	if nc > 0 {
		criticDiag = b.Critic[0].Diagnostics
	}
	nodeID, groupID, searchPass := make([]int64, na), make([]int64, na), make([]int64, na)
	weight, estimator := make([]float64, na), make([]int32, na)
	actorValues := make([]float64, 0, na*actorDiag.Len())
	estimators := []string{}
	for i := range b.Actor {
		a := &b.Actor[i]
		if !a.Diagnostics.SameNames(actorDiag) {
			return nil, nil, status.Errorf(status.InvalidArgument, "batch columns: actor sample %d has diagnostics %q, expected the names of sample 0 %q",
				i, a.Diagnostics.Names(), actorDiag.Names())
		}
		nodeID[i], groupID[i], searchPass[i], weight[i] = int64(a.NodeID), int64(a.GroupID), int64(a.SearchPass), a.Weight
		k := slices.Index(estimators, a.Estimator)
		if k < 0 {
			k = len(estimators)
			estimators = append(estimators, a.Estimator)
		}
		estimator[i] = int32(k)
		actorValues = a.Diagnostics.AppendValues(actorValues)
	}
	criticNode, target := make([]int64, nc), make([]float64, nc)
	criticValues := make([]float64, 0, nc*criticDiag.Len())
	for i := range b.Critic {
		c := &b.Critic[i]
		if !c.Diagnostics.SameNames(criticDiag) {
			return nil, nil, status.Errorf(status.InvalidArgument, "batch columns: critic sample %d has diagnostics %q, expected the names of sample 0 %q",
				i, c.Diagnostics.Names(), criticDiag.Names())
		}
		criticNode[i], target[i] = int64(c.NodeID), c.Target
		criticValues = c.Diagnostics.AppendValues(criticValues)
	}
	w := &blobWriter{}
	putI64s(w, "actor_node_id", nodeID)
	putI64s(w, "actor_group_id", groupID)
	putF64s(w, "actor_weight", weight)
	putI64s(w, "actor_search_pass", searchPass)
	putI32s(w, "actor_estimator", estimator)
	putF64s(w, "actor_diagnostics", actorValues)
	putI64s(w, "critic_node_id", criticNode)
	putF64s(w, "critic_target", target)
	putF64s(w, "critic_diagnostics", criticValues)
	return w, map[string]any{"n_actor": na, "n_critic": nc, "estimators": estimators,
		"actor_diagnostics": nonNil(actorDiag.Names()), "critic_diagnostics": nonNil(criticDiag.Names())}, nil
}

// nonNil keeps an empty list a JSON array rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// focus_batch_critic_contexts writes every critic sample's context text into
// one C buffer: the UTF-8 bytes of sample i are context[offsets[i]:offsets[i+1]].
// Prepared samples build their contexts from the tree only now.
//
//export focus_batch_critic_contexts
func focus_batch_critic_contexts(h C.focus_handle, layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		return returnBlob(criticContexts(b), layout, blob, size, map[string]any{"n_critic": len(b.Critic)})
	})
}

// criticContexts plans focus_batch_critic_contexts' buffer.
func criticContexts(b *prepare.Batch) *blobWriter {
	offsets, n := make([]int64, 1, len(b.Critic)+1), 0
	for i := range b.Critic {
		n += b.Critic[i].ContextLen()
		offsets = append(offsets, int64(n))
	}
	w := &blobWriter{}
	putI64s(w, "offsets", offsets)
	w.add("context", n, 1, func(d []byte) {
		d = d[:0:len(d)] // the section has exactly n bytes: appends stay in place
		for i := range b.Critic {
			d = b.Critic[i].AppendContext(d)
		}
	})
	return w
}

// returnBlob builds w's buffer and hands it out with its layout: meta plus
// "sections" (each section's byte offset and element count).
func returnBlob(w *blobWriter, layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t, meta map[string]any) error {
	mem, n, sections := w.build()
	meta["sections"] = sections
	if err := returnJSON(layout, meta); err != nil {
		C.free(mem)
		return err
	}
	*blob, *size = mem, C.size_t(n)
	return nil
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
func focus_batch_from_json(data *C.char, n C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
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
func focus_batch_spans(h C.focus_handle, sample C.int64_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
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
func focus_batch_text(h C.focus_handle, kind *C.char, kindLen C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		switch k := goString(kind, kindLen); k {
		case "describe":
			setBytes(out, export.Describe(b))
		case "edges":
			setBytes(out, export.FormatEdges(b))
		default:
			return status.Errorf(status.InvalidArgument, "batch text: unknown kind %q, expected describe or edges", k)
		}
		return nil
	})
}

//export focus_format_tree
func focus_format_tree(h C.focus_handle, batch C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		t, err := treeOf(h)
		if err != nil {
			return err
		}
		b, err := optionalBatch(batch)
		if err != nil {
			return err
		}
		setBytes(out, export.FormatTree(t, b))
		return nil
	})
}

//export focus_tree_html
func focus_tree_html(h C.focus_handle, reward *C.char, n C.size_t, batch C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
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
		setBytes(out, buf.String())
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

// littleEndian: the C side reads every section in the host's byte order,
// which on every platform Go supports with cgo here is little-endian; there
// a section is one copy of the Go slice's memory.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// rawBytes is the memory of v as bytes.
func rawBytes[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(v[0])))
}

func putU32s(w *blobWriter, name string, v []uint32) {
	w.add(name, len(v), 4, func(d []byte) {
		if littleEndian {
			copy(d, rawBytes(v))
			return
		}
		for i, x := range v {
			binary.LittleEndian.PutUint32(d[4*i:], x)
		}
	})
}

func putI64s(w *blobWriter, name string, v []int64) {
	w.add(name, len(v), 8, func(d []byte) {
		if littleEndian {
			copy(d, rawBytes(v))
			return
		}
		for i, x := range v {
			binary.LittleEndian.PutUint64(d[8*i:], uint64(x))
		}
	})
}

func putI32s(w *blobWriter, name string, v []int32) {
	w.add(name, len(v), 4, func(d []byte) {
		if littleEndian {
			copy(d, rawBytes(v))
			return
		}
		for i, x := range v {
			binary.LittleEndian.PutUint32(d[4*i:], uint32(x))
		}
	})
}

func putF64s(w *blobWriter, name string, v []float64) {
	w.add(name, len(v), 8, func(d []byte) {
		if littleEndian {
			copy(d, rawBytes(v))
			return
		}
		for i, x := range v {
			binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(x))
		}
	})
}

// putBools writes one byte per value, 0 or 1 (a Go bool's own representation).
func putBools(w *blobWriter, name string, v []bool) {
	w.add(name, len(v), 1, func(d []byte) { copy(d, rawBytes(v)) })
}

func putBytes(w *blobWriter, name string, v []byte) {
	w.add(name, len(v), 1, func(d []byte) { copy(d, v) })
}

//export focus_batch_export
func focus_batch_export(h C.focus_handle, groupIndex C.int64_t, minAbs C.double, layout *C.focus_bytes,
	blob *unsafe.Pointer, size *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		f, st, err := export.EncodeShared(b, int(groupIndex), export.Options{MinAbsAdvantage: float64(minAbs)})
		if err != nil {
			return err
		}
		w := &blobWriter{}
		a, c := &f.Actor, &f.Critic
		putI64s(w, "base", st.Base)
		putI64s(w, "delta_offsets", st.Offsets)
		putU32s(w, "delta_tokens", st.Tokens)
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
		return returnBlob(w, layout, blob, size, map[string]any{"problem_id": f.ProblemID, "group_index": f.GroupIndex,
			"estimators": f.Estimators, "n_actor": f.NumActor(), "n_critic": f.NumCritic()})
	})
}
