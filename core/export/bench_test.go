package export_test

import (
	"fmt"
	"testing"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// benchRollouts scales the Selective-shaped tree of treetest.Search: 8
// segments of 256 tokens per rollout.
var benchRollouts = []int{32, 256, 1024, 4096}

func BenchmarkPrepare(b *testing.B) {
	for _, n := range benchRollouts {
		tr := treetest.Search(n, 8, 256, 1)
		b.Run(fmt.Sprintf("rollouts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tr.Len()), "nodes")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tr.Len()), "ns/node")
		})
	}
}

// BenchmarkPrepareExport is the whole path from a collected tree to the flat
// records handed to Python: prepare, then encode every actor span with its
// full context.
func BenchmarkPrepareExport(b *testing.B) {
	benchPrepareExport(b, func(batch *prepare.Batch) (int, error) {
		f, err := export.Encode(batch, 0, export.Options{})
		if err != nil {
			return 0, err
		}
		return len(f.Actor.Tokens), nil
	})
}

// BenchmarkPrepareExportShared is the path to Python: prepare, then encode
// every actor record against earlier ones (what crosses the C boundary).
// ns/token is per token of the records' full contexts, as above.
func BenchmarkPrepareExportShared(b *testing.B) {
	benchPrepareExport(b, func(batch *prepare.Batch) (int, error) {
		f, _, err := export.EncodeShared(batch, 0, export.Options{})
		if err != nil {
			return 0, err
		}
		tokens := 0
		for i := range f.NumActor() {
			tokens += int(f.Actor.SpanStart[i] + f.Actor.SpanOffsets[i+1] - f.Actor.SpanOffsets[i])
		}
		return tokens, nil
	})
}

// BenchmarkPrepareExportPaths is BenchmarkPrepareExportShared in the path
// layout (what crosses the C boundary for to_records(layout="paths")); ns/token
// is per token of the path records.
func BenchmarkPrepareExportPaths(b *testing.B) {
	benchPrepareExport(b, func(batch *prepare.Batch) (int, error) {
		_, st, err := export.EncodeShared(batch, 0, export.Options{Layout: export.LayoutPaths})
		if err != nil {
			return 0, err
		}
		return len(st.Tokens), nil
	})
}

// benchPrepareExport prepares each benchmark tree and encodes it with encode, which
// returns the tokens of the records' full contexts (for ns/token).
func benchPrepareExport(b *testing.B, encode func(*prepare.Batch) (int, error)) {
	for _, n := range benchRollouts {
		tr := treetest.Search(n, 8, 256, 1)
		b.Run(fmt.Sprintf("rollouts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			tokens := 0
			for b.Loop() {
				batch, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
				if err != nil {
					b.Fatal(err)
				}
				if tokens, err = encode(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tr.Len()), "nodes")
			b.ReportMetric(float64(tokens), "tokens")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tokens), "ns/token")
		})
	}
}
