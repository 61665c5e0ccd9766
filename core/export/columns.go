package export

import (
	"slices"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// The blobs a batch crosses the C boundary as. Each is a Blob (one format):
// BatchColumns the samples' numbers, CriticContexts the critic samples'
// texts, SampleSpans one actor sample's spans, RecordsBlob (ExportBatch,
// TreeRecords.Blob) the trainer records.

// BatchColumns lays out a batch's samples column-wise: per actor sample its
// node id, group id, weight, search pass, estimator index and diagnostics
// row; per critic sample its node id, target and diagnostics row. Diagnostic
// names are named once in the metadata, so every sample's diagnostics must
// have the same names as the first sample's (always true of a prepared
// batch); a batch whose samples differ is refused.
//
// Sections: actor_node_id, actor_group_id, actor_search_pass (int64),
// actor_weight, actor_visitation (float64), actor_estimator (int32, into meta "estimators"),
// actor_diagnostics (float64, n_actor rows of meta "actor_diagnostics"),
// critic_node_id (int64), critic_target (float64), critic_diagnostics
// (float64, rows of meta "critic_diagnostics"). Meta: n_actor, n_critic.
func BatchColumns(b *prepare.Batch) (*Blob, error) {
	na, nc := len(b.Actor), len(b.Critic)
	var actorDiag, criticDiag prepare.Diagnostics
	if na > 0 {
		actorDiag = b.Actor[0].Diagnostics
	}
	if nc > 0 {
		criticDiag = b.Critic[0].Diagnostics
	}
	nodeID, groupID, searchPass := make([]int64, na), make([]int64, na), make([]int64, na)
	weight, visitation, estimator := make([]float64, na), make([]float64, na), make([]int32, na)
	actorValues := make([]float64, 0, na*actorDiag.Len())
	estimators := []string{}
	for i := range b.Actor {
		a := &b.Actor[i]
		if !a.Diagnostics.SameNames(actorDiag) {
			return nil, status.Errorf(status.InvalidArgument, "batch columns: actor sample %d has diagnostics %q, expected the names of sample 0 %q",
				i, a.Diagnostics.Names(), actorDiag.Names())
		}
		nodeID[i], groupID[i], searchPass[i], weight[i] = int64(a.NodeID), int64(a.GroupID), int64(a.SearchPass), a.Weight
		k := slices.Index(estimators, a.Estimator)
		if k < 0 {
			k = len(estimators)
			estimators = append(estimators, a.Estimator)
		}
		estimator[i] = int32(k)
		visitation[i] = a.Visitation
		actorValues = a.Diagnostics.AppendValues(actorValues)
	}
	criticNode, target := make([]int64, nc), make([]float64, nc)
	criticValues := make([]float64, 0, nc*criticDiag.Len())
	for i := range b.Critic {
		c := &b.Critic[i]
		if !c.Diagnostics.SameNames(criticDiag) {
			return nil, status.Errorf(status.InvalidArgument, "batch columns: critic sample %d has diagnostics %q, expected the names of sample 0 %q",
				i, c.Diagnostics.Names(), criticDiag.Names())
		}
		criticNode[i], target[i] = int64(c.NodeID), c.Target
		criticValues = c.Diagnostics.AppendValues(criticValues)
	}
	w := newBlob(map[string]any{"n_actor": na, "n_critic": nc, "estimators": estimators,
		"actor_diagnostics": nonNil(actorDiag.Names()), "critic_diagnostics": nonNil(criticDiag.Names())})
	w.Int64s("actor_node_id", nodeID)
	w.Int64s("actor_group_id", groupID)
	w.Float64s("actor_weight", weight)
	w.Float64s("actor_visitation", visitation)
	w.Int64s("actor_search_pass", searchPass)
	w.Int32s("actor_estimator", estimator)
	w.Float64s("actor_diagnostics", actorValues)
	w.Int64s("critic_node_id", criticNode)
	w.Float64s("critic_target", target)
	w.Float64s("critic_diagnostics", criticValues)
	return w, nil
}

// nonNil keeps an empty list a JSON array rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// CriticContexts lays out every critic sample's context text: the UTF-8
// bytes of sample i are context[offsets[i]:offsets[i+1]]. Prepared samples
// build their contexts from the tree only now, straight into the buffer.
//
// Sections: offsets (int64, n_critic+1), context (bytes). Meta: n_critic.
func CriticContexts(b *prepare.Batch) *Blob {
	offsets, n := make([]int64, 1, len(b.Critic)+1), 0
	for i := range b.Critic {
		n += b.Critic[i].ContextLen()
		offsets = append(offsets, int64(n))
	}
	w := newBlob(map[string]any{"n_critic": len(b.Critic)})
	w.Int64s("offsets", offsets)
	w.add("context", n, 1, func(d []byte) {
		d = d[:0:len(d)] // the section has exactly n bytes: appends stay in place
		for i := range b.Critic {
			d = b.Critic[i].AppendContext(d)
		}
	})
	return w
}

// SampleSpans lays out the spans of actor sample i (ActorSample.spans in
// Python): span k is tokens, trainable and logprobs [offsets[k]:offsets[k+1]],
// each a full context trainable only on that span's generated tokens.
//
// Sections: offsets (int64, n_spans+1), tokens (uint32), trainable (bool),
// logprobs (float64). Meta: n_spans.
func SampleSpans(b *prepare.Batch, i int) (*Blob, error) {
	if i < 0 || i >= len(b.Actor) {
		return nil, status.Errorf(status.InvalidArgument, "batch: actor sample %d out of range [0, %d)", i, len(b.Actor))
	}
	a := &b.Actor[i]
	n := a.NumSpans()
	offsets, total := make([]int64, 1, n+1), 0
	for k := range n {
		total += a.SpanLen(k)
		offsets = append(offsets, int64(total))
	}
	all := tree.PackedSequence{Tokens: make([]uint32, 0, total), Trainable: make([]bool, 0, total), Logprobs: make([]float64, 0, total)}
	for k := range n {
		all = a.AppendSpan(all, k)
	}
	w := newBlob(map[string]any{"n_spans": n})
	w.Int64s("offsets", offsets)
	w.Uint32s("tokens", all.Tokens)
	w.Bools("trainable", all.Trainable)
	w.Float64s("logprobs", all.Logprobs)
	return w, nil
}

// RecordsBlob lays out the trainer records EncodeShared made (f with its
// shared tokens st): what Batch.to_records reads.
//
// Actor sections (one entry per record unless noted): base, delta_offsets
// (n_actor+1), delta_tokens (uint32) — SharedTokens; span_start,
// span_offsets (n_actor+1), span_mask (bool), span_logprobs (float64),
// advantage (float64), node_id, search_pass, estimator (int32, into meta
// "estimators"), response_start, return (float64), finished (bool),
// off_policy_tokens, weight_version_offsets (n_actor+1) and weight_version
// (int32, into meta "weight_versions": each record's weight versions) and, when
// the export decoded text (Options.Text), response_text_offsets (n_actor+1)
// and response_text (UTF-8 bytes) — ActorColumns. Critic sections: critic_offsets (n_critic+1),
// critic_context (bytes), critic_target (float64), critic_node_id. Integers
// are int64 unless noted. Meta: problem_id, group_index, estimators,
// weight_versions (ActorColumns.VersionNames), n_actor,
// n_critic, layout ("spans" or "paths"), and actor_keys / critic_keys
// (ActorKeys or, in the path layout, PathKeys; CriticKeys: the record keys, in
// order). The path layout adds span_advantages (float64, aligned with
// span_mask: ActorColumns.SpanAdvantages).
func RecordsBlob(f *Flat, st *SharedTokens) *Blob {
	w := newBlob(map[string]any{"problem_id": f.ProblemID, "group_index": f.GroupIndex,
		"estimators": nonNil(f.Estimators), "weight_versions": nonNil(f.Actor.VersionNames), "n_actor": f.NumActor(), "n_critic": f.NumCritic(),
		"layout": string(f.Layout), "actor_keys": f.actorKeys(), "critic_keys": CriticKeys})
	a, c := &f.Actor, &f.Critic
	w.Int64s("base", st.Base)
	w.Int64s("delta_offsets", st.Offsets)
	w.Uint32s("delta_tokens", st.Tokens)
	w.Int64s("span_start", a.SpanStart)
	w.Int64s("span_offsets", a.SpanOffsets)
	w.Bools("span_mask", a.SpanMask)
	w.Float64s("span_logprobs", a.SpanLogprobs)
	if f.Layout == LayoutPaths {
		w.Float64s("span_advantages", a.SpanAdvantages)
	}
	w.Float64s("advantage", a.Advantage)
	w.Int64s("node_id", a.NodeID)
	w.Int64s("search_pass", a.SearchPass)
	w.Int32s("estimator", a.Estimator)
	w.Int64s("response_start", a.ResponseStart)
	w.Float64s("return", a.Return)
	w.Bools("finished", a.Finished)
	w.Int64s("off_policy_tokens", a.OffPolicyTokens)
	w.Int64s("weight_version_offsets", a.WeightVersionOffsets)
	w.Int32s("weight_version", a.WeightVersion)
	if a.TextOffsets != nil {
		w.Int64s("response_text_offsets", a.TextOffsets)
		w.Raw("response_text", a.Text)
	}
	w.Int64s("critic_offsets", c.Offsets)
	w.Raw("critic_context", c.Context)
	w.Float64s("critic_target", c.Target)
	w.Int64s("critic_node_id", c.NodeID)
	return w
}

// ExportBatch is b's trainer records for prompt group groupIndex as a
// RecordsBlob (focus_batch_export).
func ExportBatch(b *prepare.Batch, groupIndex int, opts Options) (*Blob, error) {
	f, st, err := EncodeShared(b, groupIndex, opts)
	if err != nil {
		return nil, err
	}
	return RecordsBlob(f, st), nil
}
