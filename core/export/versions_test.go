package export_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree"
)

// versionedTree is responseTree with each edge's weight version set from
// versions (node id -> version; the root, the prompt, has none).
func versionedTree(versions map[int]string) *tree.Tree {
	tr := responseTree()
	for id, v := range versions {
		tr.Nodes[id].WeightVersion = v
	}
	return tr
}

// TestWeightVersions: each actor record names the weight versions of the
// edges holding its response (from response_start on), distinct, in path
// order, in both layouts, plain, with shared tokens and in the records blob; a
// tree whose server reported no version gives none.
func TestWeightVersions(t *testing.T) {
	type want struct {
		node, start int
		versions    []string
	}
	// a (1) and its leaves 3, 4 came from v1 and v2 in turn; b (2) from v2, its
	// leaf 6 from v1 (replicas of two versions serve one run); 5 failed.
	mixed := map[int]string{1: "v1", 3: "v2", 4: "v1", 2: "v2", 6: "v1"}
	cases := []struct {
		name     string
		versions map[int]string
		want     map[export.Layout][]want
	}{
		{"two versions", mixed, map[export.Layout][]want{
			export.LayoutSpans: {
				{1, 3, []string{"v1"}},
				{2, 3, []string{"v2"}},
				{3, 6, []string{"v2"}},
				{3, 10, []string{"v2"}},
				{4, 5, []string{"v1"}},
				{6, 4, []string{"v1"}},
			},
			export.LayoutPaths: {
				{3, 3, []string{"v1", "v2"}}, // 10 11 (a, v1) then 7 31 32 8 9 33 (v2)
				{4, 5, []string{"v1"}},       // only 30 is its response
				{6, 3, []string{"v2", "v1"}}, // 20 (b, v2) then 40 (v1): path order
			},
		}},
		{"one version, named once", map[int]string{1: "v1", 2: "v1", 3: "v1", 4: "v1", 6: "v1"}, map[export.Layout][]want{
			export.LayoutPaths: {{3, 3, []string{"v1"}}, {4, 5, []string{"v1"}}, {6, 3, []string{"v1"}}},
		}},
		{"an edge without a version adds none", map[int]string{3: "v2", 6: "v1"}, map[export.Layout][]want{
			export.LayoutPaths: {{3, 3, []string{"v2"}}, {4, 5, []string{}}, {6, 3, []string{"v1"}}},
		}},
		{"none reported", nil, map[export.Layout][]want{
			export.LayoutSpans: {{1, 3, []string{}}, {2, 3, []string{}}, {3, 6, []string{}}, {3, 10, []string{}}, {4, 5, []string{}}, {6, 4, []string{}}},
			export.LayoutPaths: {{3, 3, []string{}}, {4, 5, []string{}}, {6, 3, []string{}}},
		}},
	}
	for _, c := range cases {
		for layout, wants := range c.want {
			t.Run(c.name+"/"+string(layout), func(t *testing.T) {
				tr := versionedTree(c.versions)
				require.NoError(t, tr.Validate())
				b := mustPrepare(t, tr, prepare.DirectBranchTd{})
				opts := export.Options{Layout: layout}
				f := mustEncode(t, b, 0, opts)
				require.Equal(t, len(wants), f.NumActor())
				for i, w := range wants {
					r := f.ActorRecord(i)
					assert.Equal(t, w.node, r.NodeID, "record %d", i)
					assert.Equal(t, w.start, r.ResponseStart, "record %d", i)
					assert.Equal(t, w.versions, r.WeightVersions, "record %d", i)
				}

				fs, st, err := export.EncodeShared(b, 0, opts)
				require.NoError(t, err)
				blob := export.RecordsBlob(fs, st)
				names, ok := blob.Meta["weight_versions"].([]string)
				require.True(t, ok, "the records blob names the weight versions in its metadata")
				secs := blob.Sections()
				off, idx := secs["weight_version_offsets"], secs["weight_version"]
				offsets := i64s(blob.Buffer()[off.Offset : off.Offset+8*off.Count])
				require.Len(t, offsets, len(wants)+1)
				index := i32s(blob.Buffer()[idx.Offset : idx.Offset+4*idx.Count])
				for i, w := range wants {
					got := []string{}
					for _, k := range index[offsets[i]:offsets[i+1]] {
						got = append(got, names[k])
					}
					assert.Equal(t, w.versions, got, "blob record %d", i)
				}
			})
		}
	}
	assert.Contains(t, export.ActorKeys, "weight_versions")
}

// A record with explicit spans has no tree, so no weight version.
func TestWeightVersionsExplicitSpans(t *testing.T) {
	span := tree.PackedSequence{Tokens: []uint32{10, 20, 30}, Trainable: []bool{false, true, true}, Logprobs: []float64{0, -0.5, -1}}
	b := &prepare.Batch{Actor: []prepare.ActorSample{prepare.NewActorSample(1, 0, "DirectBranchTd", 0.4, []tree.PackedSequence{span})}}
	assert.Equal(t, []string{}, mustEncode(t, b, 0, export.Options{}).ActorRecord(0).WeightVersions)
}
