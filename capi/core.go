package main

/*
#include <stdlib.h>
#include <string.h>
#include "focus.h"
*/
import "C"

import (
	"strings"
	"unsafe"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
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

// prepareArgs decodes what preparing a tree takes: the tree handle, the reward
// config JSON and the estimator's name ("" for critic targets only).
func prepareArgs(h C.focus_handle, reward *C.char, n C.size_t, estimator *C.char, estimatorLen C.size_t) (*tree.Tree, prepare.RewardConfig, prepare.Estimator, error) {
	t, err := treeOf(h)
	if err != nil {
		return nil, prepare.RewardConfig{}, nil, err
	}
	cfg, err := rewardConfig(reward, n)
	if err != nil {
		return nil, cfg, nil, err
	}
	est, err := prepare.EstimatorByName(goString(estimator, estimatorLen))
	return t, cfg, est, err
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
		t, cfg, est, err := prepareArgs(h, reward, n, estimator, estimatorLen)
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

// focus_batch_columns writes a batch's samples column-wise into one C buffer
// (export.BatchColumns).
//
//export focus_batch_columns
func focus_batch_columns(h C.focus_handle, layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		w, err := export.BatchColumns(b)
		if err != nil {
			return err
		}
		return returnBlob(w, layout, blob, size)
	})
}

// focus_batch_critic_contexts writes every critic sample's context text into
// one C buffer (export.CriticContexts).
//
//export focus_batch_critic_contexts
func focus_batch_critic_contexts(h C.focus_handle, layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		return returnBlob(export.CriticContexts(b), layout, blob, size)
	})
}

// returnBlob writes w into one C allocation (freed with focus_buffer_free) and
// hands it out with its layout as JSON.
func returnBlob(w *export.Blob, layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t) error {
	n := w.Size()
	mem := C.malloc(C.size_t(n) + 1) // +1: malloc(0) may return NULL
	w.WriteTo(unsafe.Slice((*byte)(mem), n+1))
	if err := returnJSON(layout, w.Layout()); err != nil {
		C.free(mem)
		return err
	}
	*blob, *size = mem, C.size_t(n)
	return nil
}

// focus_batch_from_json builds a batch from records a Python caller made itself
// (Batch(actor=(ActorSample(...),)) with explicit spans).
//
//export focus_batch_from_json
func focus_batch_from_json(data *C.char, n C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var b prepare.Batch
		if err := decodeJSON(data, n, "batch", &b); err != nil {
			return err
		}
		if err := b.Check(); err != nil {
			return err
		}
		*out = C.focus_handle(handles.put(&b))
		return nil
	})
}

// focus_batch_spans writes one actor sample's spans into one C buffer
// (export.SampleSpans).
//
//export focus_batch_spans
func focus_batch_spans(h C.focus_handle, sample C.int64_t, layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		w, err := export.SampleSpans(b, int(sample))
		if err != nil {
			return err
		}
		return returnBlob(w, layout, blob, size)
	})
}

//export focus_batch_text
func focus_batch_text(h C.focus_handle, kind *C.char, kindLen C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		text, err := export.BatchText(b, goString(kind, kindLen))
		if err != nil {
			return err
		}
		setBytes(out, text)
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

//export focus_batch_export
func focus_batch_export(h C.focus_handle, groupIndex C.int64_t, minAbs C.double, recordLayout *C.char, recordLayoutLen C.size_t,
	visitation C.int32_t, layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := batchOf(h)
		if err != nil {
			return err
		}
		opts := export.Options{MinAbsAdvantage: float64(minAbs), Layout: export.Layout(goString(recordLayout, recordLayoutLen)),
			VisitationWeights: visitation != 0}
		w, err := export.ExportBatch(b, int(groupIndex), opts)
		if err != nil {
			return err
		}
		return returnBlob(w, layout, blob, size)
	})
}

// focus_tree_export prepares a collected tree and exports its trainer records
// in one call (export.FromTree): the records blob of focus_batch_export plus
// the batch's stats and failures, the tree's finished rollouts and every actor
// sample's weight; with a codec handle, each actor record's response text.
//
//export focus_tree_export
func focus_tree_export(h C.focus_handle, reward *C.char, n C.size_t, estimator *C.char, estimatorLen C.size_t,
	groupIndex C.int64_t, minAbs C.double, recordLayout *C.char, recordLayoutLen C.size_t, visitation C.int32_t,
	codec C.focus_handle, skipSpecial C.int32_t,
	layout *C.focus_bytes, blob *unsafe.Pointer, size *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		t, cfg, est, err := prepareArgs(h, reward, n, estimator, estimatorLen)
		if err != nil {
			return err
		}
		opts := export.Options{MinAbsAdvantage: float64(minAbs), Layout: export.Layout(goString(recordLayout, recordLayoutLen)),
			VisitationWeights: visitation != 0, SkipSpecialTokens: skipSpecial != 0}
		if codec != 0 {
			c, err := codecOf(codec)
			if err != nil {
				return err
			}
			opts.Text = c
		}
		r, err := export.FromTree(t, cfg, est, int(groupIndex), opts)
		if err != nil {
			return err
		}
		return returnBlob(r.Blob(), layout, blob, size)
	})
}
