package export_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// sections writes w into one buffer, as the C boundary does, and cuts out
// each section's bytes by its layout entry and element size.
func sections(w *export.Blob) map[string][]byte {
	buf := w.Buffer()
	out := make(map[string][]byte, len(w.Sections()))
	for name, sec := range w.Sections() {
		out[name] = buf[sec.Offset : sec.Offset+sec.Count*elemSize(name)]
	}
	return out
}

// elemSize is the element size of the blob sections these tests read.
func elemSize(name string) int {
	switch name {
	case "context", "critic_context", "span_mask", "trainable", "finished", "response_text":
		return 1
	case "actor_estimator", "estimator", "weight_version", "delta_tokens", "tokens":
		return 4
	}
	return 8
}

func i64s(d []byte) []int64 {
	out := make([]int64, len(d)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(d[8*i:]))
	}
	return out
}

func f64s(d []byte) []float64 {
	out := make([]float64, len(d)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
	}
	return out
}

func TestBatchColumns(t *testing.T) {
	for _, est := range []prepare.Estimator{prepare.DirectBranchTd{}, prepare.GroupBaseline{}, nil} {
		name := "critic only"
		if est != nil {
			name = est.Name()
		}
		t.Run(name, func(t *testing.T) {
			b, err := prepare.Prepare(treetest.Search(16, 4, 8, 2), prepare.DefaultRewardConfig(), est)
			require.NoError(t, err)
			w, err := export.BatchColumns(b)
			meta := w.Meta
			require.NoError(t, err)
			s := sections(w)
			require.Equal(t, len(b.Actor), meta["n_actor"])
			require.Equal(t, len(b.Critic), meta["n_critic"])
			estimators := meta["estimators"].([]string)
			names := meta["actor_diagnostics"].([]string)
			nodeID, groupID, pass := i64s(s["actor_node_id"]), i64s(s["actor_group_id"]), i64s(s["actor_search_pass"])
			weight, diag := f64s(s["actor_weight"]), f64s(s["actor_diagnostics"])
			require.Len(t, diag, len(b.Actor)*len(names))
			for i := range b.Actor {
				a := &b.Actor[i]
				assert.Equal(t, int64(a.NodeID), nodeID[i])
				assert.Equal(t, int64(a.GroupID), groupID[i])
				assert.Equal(t, int64(a.SearchPass), pass[i])
				assert.Equal(t, math.Float64bits(a.Weight), math.Float64bits(weight[i]), "weights cross bit for bit")
				assert.Equal(t, a.Estimator, estimators[binary.LittleEndian.Uint32(s["actor_estimator"][4*i:])])
				assert.Equal(t, a.Diagnostics.Names(), names)
				assert.Equal(t, a.Diagnostics.Values(), diag[i*len(names):(i+1)*len(names)])
			}
			cnames := meta["critic_diagnostics"].([]string)
			cnode, target, cdiag := i64s(s["critic_node_id"]), f64s(s["critic_target"]), f64s(s["critic_diagnostics"])
			require.Len(t, cdiag, len(b.Critic)*len(cnames))
			for i := range b.Critic {
				c := &b.Critic[i]
				assert.Equal(t, int64(c.NodeID), cnode[i])
				assert.Equal(t, c.Target, target[i])
				assert.Equal(t, c.Diagnostics.Values(), cdiag[i*len(cnames):(i+1)*len(cnames)])
			}

			ctx := sections(export.CriticContexts(b))
			offsets := i64s(ctx["offsets"])
			require.Len(t, offsets, len(b.Critic)+1)
			for i := range b.Critic {
				assert.Equal(t, b.Critic[i].Context(), string(ctx["context"][offsets[i]:offsets[i+1]]))
			}
		})
	}
}

func TestBatchColumnsRefusesMixedDiagnostics(t *testing.T) {
	b := &prepare.Batch{Actor: []prepare.ActorSample{
		prepare.NewActorSample(1, 0, "x", 0.5, nil),
		prepare.NewActorSample(2, 0, "x", 0.5, nil),
	}}
	b.Actor[1].Diagnostics = prepare.DiagnosticsOf(prepare.Diagnostic{Name: "extra", Value: 1})
	_, err := export.BatchColumns(b)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `actor sample 1 has diagnostics ["extra"]`)

	w, err := export.BatchColumns(&prepare.Batch{})
	require.NoError(t, err)
	assert.Equal(t, []string{}, w.Meta["actor_diagnostics"], "an empty batch still names its (no) diagnostics")
	assert.Empty(t, sections(w)["actor_node_id"])
}
