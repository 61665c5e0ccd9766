package export

import (
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// TreeRecords is one collected tree's trainer records, made in one call
// (FromTree): the batch Prepare made and its records as columns with shared
// tokens. It is what collect_records, the Slime and Tinker integrations and
// the command line train on, without building the Batch in Python.
type TreeRecords struct {
	Tree   *tree.Tree
	Batch  *prepare.Batch
	Flat   *Flat
	Shared *SharedTokens
}

// FromTree prepares t with reward and est (nil: critic targets only) and
// exports the batch's records for prompt group groupIndex under opts
// (min_abs_advantage filtering included): prepare -> export as one Go call,
// starting from a collected tree. opts is checked before any work.
func FromTree(t *tree.Tree, reward prepare.RewardConfig, est prepare.Estimator, groupIndex int, opts Options) (*TreeRecords, error) {
	if err := opts.Validate(); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "export")
	}
	b, err := prepare.Prepare(t, reward, est)
	if err != nil {
		return nil, err
	}
	f, st, err := EncodeShared(b, groupIndex, opts)
	if err != nil {
		return nil, err
	}
	return &TreeRecords{Tree: t, Batch: b, Flat: f, Shared: st}, nil
}

// Blob lays out the records as RecordsBlob does, plus, in the metadata, the
// batch's "stats" (Batch.stats) and "failures", the tree's finished
// "rollouts" (tree.Rollouts: node_id, return, done, segments; what a trainer
// reports as outcomes, whichever records min_abs_advantage dropped) and its
// "sampled_tokens" (tree.GeneratedTokens), and a sample_weight section
// (float64): every actor sample's advantage in batch order, records dropped
// by min_abs_advantage included (one per edge, where a record is one per
// span).
func (r *TreeRecords) Blob() *Blob {
	w := RecordsBlob(r.Flat, r.Shared)
	w.Meta["stats"] = r.Batch.Stats
	w.Meta["rollouts"] = r.Tree.Rollouts()
	w.Meta["sampled_tokens"] = r.Tree.GeneratedTokens()
	failures := r.Batch.Failures
	if failures == nil {
		failures = []prepare.Failure{}
	}
	w.Meta["failures"] = failures
	weights := make([]float64, len(r.Batch.Actor))
	for i := range r.Batch.Actor {
		weights[i] = r.Batch.Actor[i].Weight
	}
	w.Float64s("sample_weight", weights)
	return w
}
