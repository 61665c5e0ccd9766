package export_test

import (
	"encoding/binary"
	"math"
	"testing"

	jsoniter "github.com/json-iterator/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

func u32s(d []byte) []uint32 {
	out := make([]uint32, len(d)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(d[4*i:])
	}
	return out
}

func i32s(d []byte) []int32 {
	out := make([]int32, len(d)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(d[4*i:]))
	}
	return out
}

func bools(d []byte) []bool {
	out := make([]bool, len(d))
	for i, x := range d {
		out[i] = x == 1
	}
	return out
}

// TestBlobRoundTrip writes one section of every type (with odd lengths, so
// the next section needs padding) and reads each back from the buffer by its
// layout: values bit for bit, every offset 8-byte aligned, no overlap.
func TestBlobRoundTrip(t *testing.T) {
	var b export.Blob
	b.Meta = map[string]any{"n": 3}
	u := []uint32{0, 1, math.MaxUint32}
	i32 := []int32{math.MinInt32, -1, 7}
	i64 := []int64{math.MinInt64, -1, math.MaxInt64}
	f := []float64{math.Copysign(0, -1), math.Inf(-1), math.NaN(), math.SmallestNonzeroFloat64, 0.1}
	bs := []bool{true, false, true}
	raw := []byte("héllo\x00")
	b.Raw("raw", raw)
	b.Uint32s("u32", u)
	b.Bools("bool", bs)
	b.Int32s("i32", i32)
	b.Int64s("i64", i64)
	b.Float64s("f64", f)
	b.Uint32s("empty", nil)

	sizes := map[string]int{"raw": 1, "u32": 4, "bool": 1, "i32": 4, "i64": 8, "f64": 8, "empty": 4}
	secs := b.Sections()
	require.Len(t, secs, len(sizes))
	end := 0
	for _, name := range []string{"raw", "u32", "bool", "i32", "i64", "f64", "empty"} {
		s := secs[name]
		assert.Zero(t, s.Offset%8, "section %s is 8-byte aligned", name)
		assert.GreaterOrEqual(t, s.Offset, end, "section %s follows the one before", name)
		assert.Less(t, s.Offset-end, 8, "section %s has less than 8 bytes of padding", name)
		end = s.Offset + s.Count*sizes[name]
	}
	require.Equal(t, end, b.Size(), "the buffer ends with the last section")

	// Written into a buffer that is not zeroed, as C's malloc gives it.
	buf := make([]byte, b.Size())
	for i := range buf {
		buf[i] = 0xAA
	}
	b.WriteTo(buf)
	at := func(name string) []byte {
		s := secs[name]
		return buf[s.Offset : s.Offset+s.Count*sizes[name]]
	}
	assert.Equal(t, raw, at("raw"))
	assert.Equal(t, u, u32s(at("u32")))
	assert.Equal(t, bs, bools(at("bool")))
	assert.Equal(t, []byte{1, 0, 1}, at("bool"), "a bool is one byte, 0 or 1")
	assert.Equal(t, i32, i32s(at("i32")))
	assert.Equal(t, i64, i64s(at("i64")))
	got := f64s(at("f64"))
	for i := range f {
		assert.Equal(t, math.Float64bits(f[i]), math.Float64bits(got[i]), "float %d bit for bit", i)
	}
	assert.Equal(t, export.Section{Offset: secs["empty"].Offset, Count: 0}, secs["empty"])
	fresh := b.Buffer()
	for name, sec := range secs {
		assert.Equal(t, at(name), fresh[sec.Offset:sec.Offset+sec.Count*sizes[name]], "Buffer writes section %s as WriteTo does", name)
	}

	// The layout is the metadata plus the sections, as JSON.
	data, err := jsoniter.Marshal(b.Layout())
	require.NoError(t, err)
	var layout struct {
		N        int                       `json:"n"`
		Sections map[string]export.Section `json:"sections"`
	}
	require.NoError(t, jsoniter.Unmarshal(data, &layout))
	assert.Equal(t, 3, layout.N)
	assert.Equal(t, secs, layout.Sections)
	assert.NotContains(t, b.Meta, "sections", "Layout does not change Meta")
}

func TestBlobEmpty(t *testing.T) {
	var b export.Blob
	assert.Zero(t, b.Size())
	assert.Empty(t, b.Buffer())
	assert.Equal(t, map[string]any{"sections": map[string]export.Section{}}, b.Layout())
}

// TestEmptyBatchBlobs: every blob of an empty batch has its sections, all
// empty, and a zero-length buffer apart from the one-entry offset columns.
func TestEmptyBatchBlobs(t *testing.T) {
	b := &prepare.Batch{}
	cols, err := export.BatchColumns(b)
	require.NoError(t, err)
	assert.Zero(t, cols.Size())
	assert.Len(t, cols.Sections(), 10) // nine columns plus actor_visitation
	assert.Equal(t, []string{}, cols.Meta["estimators"])

	ctx := export.CriticContexts(b)
	assert.Equal(t, []int64{0}, i64s(sections(ctx)["offsets"]))
	assert.Zero(t, ctx.Sections()["context"].Count)

	rec, err := export.ExportBatch(b, 4, export.Options{})
	require.NoError(t, err)
	s := sections(rec)
	assert.Equal(t, []int64{0}, i64s(s["delta_offsets"]))
	assert.Equal(t, []int64{0}, i64s(s["span_offsets"]))
	assert.Equal(t, []int64{0}, i64s(s["critic_offsets"]))
	for _, name := range []string{"base", "delta_tokens", "span_start", "span_mask", "span_logprobs", "advantage", "node_id", "search_pass", "estimator", "critic_context", "critic_target", "critic_node_id"} {
		assert.Zero(t, rec.Sections()[name].Count, name)
	}
	assert.Equal(t, 0, rec.Meta["n_actor"])
	assert.Equal(t, 4, rec.Meta["group_index"])
	assert.Equal(t, []string{}, rec.Meta["estimators"])
	assert.Equal(t, export.ActorKeys, rec.Meta["actor_keys"])
	assert.Equal(t, export.CriticKeys, rec.Meta["critic_keys"])

	_, err = export.SampleSpans(b, 0)
	require.Error(t, err)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), "batch: actor sample 0 out of range [0, 0)")
}

// TestSampleSpans: the spans blob of each sample holds exactly its Spans.
func TestSampleSpans(t *testing.T) {
	b, err := prepare.Prepare(treetest.Search(16, 4, 8, 2), prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	explicit := tree.PackedSequence{Tokens: []uint32{5, 6, 7}, Trainable: []bool{false, true, true}, Logprobs: []float64{0, -0.1, -0.2}}
	b.Actor = append(b.Actor, prepare.NewActorSample(99, 0, "Custom", 1, []tree.PackedSequence{explicit, explicit}))
	for i := range b.Actor {
		w, err := export.SampleSpans(b, i)
		require.NoError(t, err)
		s := sections(w)
		offsets := i64s(s["offsets"])
		spans := b.Actor[i].Spans()
		require.Equal(t, len(spans), w.Meta["n_spans"])
		require.Len(t, offsets, len(spans)+1)
		tokens, trainable, logprobs := u32s(s["tokens"]), bools(s["trainable"]), f64s(s["logprobs"])
		for k, sp := range spans {
			lo, hi := offsets[k], offsets[k+1]
			assert.Equal(t, sp.Tokens, tokens[lo:hi])
			assert.Equal(t, sp.Trainable, trainable[lo:hi])
			assert.Equal(t, sp.Logprobs, logprobs[lo:hi])
		}
	}
	_, err = export.SampleSpans(b, -1)
	require.Error(t, err)
}

// TestRecordsBlob: the records blob carries Flat's columns and the shared
// tokens rebuild every record's tokens.
func TestRecordsBlob(t *testing.T) {
	b, err := prepare.Prepare(treetest.Search(16, 4, 8, 2), prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	full, err := export.Encode(b, 2, export.Options{})
	require.NoError(t, err)
	w, err := export.ExportBatch(b, 2, export.Options{})
	require.NoError(t, err)
	s := sections(w)
	base, offs, delta := i64s(s["base"]), i64s(s["delta_offsets"]), u32s(s["delta_tokens"])
	tokens := make([][]uint32, full.NumActor())
	for i := range tokens {
		if base[i] >= 0 {
			tokens[i] = append(tokens[i], tokens[base[i]]...)
		}
		tokens[i] = append(tokens[i], delta[offs[i]:offs[i+1]]...)
		assert.Equal(t, full.ActorRecord(i).Tokens, tokens[i], "record %d", i)
	}
	assert.Equal(t, full.Actor.Advantage, f64s(s["advantage"]))
	assert.Equal(t, full.Actor.SpanMask, bools(s["span_mask"]))
	assert.Equal(t, full.Actor.Estimator, i32s(s["estimator"]))
	assert.Equal(t, full.Critic.Context, s["critic_context"])
	assert.Equal(t, full.NumActor(), w.Meta["n_actor"])
	assert.Equal(t, full.NumCritic(), w.Meta["n_critic"])
}

// TestFromTree: the one-call pipeline gives the records Prepare then
// ExportBatch give, plus stats, failures and every sample's weight; a bad
// threshold fails before any work.
func TestFromTree(t *testing.T) {
	tr := treetest.Search(16, 4, 8, 2)
	cfg := prepare.DefaultRewardConfig()
	opts := export.Options{MinAbsAdvantage: 0.05}
	b, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
	require.NoError(t, err)
	want, err := export.ExportBatch(b, 3, opts)
	require.NoError(t, err)

	r, err := export.FromTree(tr, cfg, prepare.DirectBranchTd{}, 3, opts)
	require.NoError(t, err)
	got := r.Blob()
	gs, ws := sections(got), sections(want)
	for name, data := range ws {
		assert.Equal(t, data, gs[name], name)
	}
	assert.Equal(t, b.Stats, got.Meta["stats"])
	assert.Equal(t, []prepare.Failure{}, got.Meta["failures"])
	weights := f64s(gs["sample_weight"])
	require.Len(t, weights, len(b.Actor))
	for i := range b.Actor {
		assert.Equal(t, b.Actor[i].Weight, weights[i])
	}
	assert.Less(t, got.Meta["n_actor"].(int), len(b.Actor), "the threshold dropped some records")

	critic, err := export.FromTree(tr, cfg, nil, 0, export.Options{})
	require.NoError(t, err)
	assert.Zero(t, critic.Flat.NumActor())
	assert.Equal(t, len(b.Critic), critic.Flat.NumCritic())

	_, err = export.FromTree(tr, cfg, prepare.DirectBranchTd{}, 0, export.Options{MinAbsAdvantage: -1})
	require.Error(t, err)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), "export: min_abs_advantage is -1, must be >= 0")
}
