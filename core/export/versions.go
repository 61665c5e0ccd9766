package export

import (
	"slices"

	"github.com/focus-go/focus-go/core/tree"
)

// addWeightVersions appends the weight versions of the record just added, whose
// response is tokens [start, end) of the path to node id of t (nil for explicit
// spans, which have none): the distinct non-empty tree.Node.WeightVersion of the
// edges holding those tokens, in path order (first appearance). A response one
// edge generated names one version; one that spans edges of several versions
// names each once. None when the server reported no version.
func (ac *ActorColumns) addWeightVersions(t *tree.Tree, id, start, end int) {
	from := len(ac.WeightVersion)
	if t != nil && end > start {
		hi := t.ContextLen(id)
		for c := id; c >= 0 && hi > start; c = t.Nodes[c].Parent {
			lo := hi - t.Nodes[c].EdgeLen()
			if v := t.Nodes[c].WeightVersion; v != "" && lo < end {
				ac.WeightVersion = append(ac.WeightVersion, ac.versionIndex(v))
			}
			hi = lo
		}
		// Walked leaf to root: put them in path order, then keep first appearances.
		got := ac.WeightVersion[from:]
		slices.Reverse(got)
		kept := got[:0]
		for _, k := range got {
			if !slices.Contains(kept, k) {
				kept = append(kept, k)
			}
		}
		ac.WeightVersion = ac.WeightVersion[:from+len(kept)]
	}
	ac.WeightVersionOffsets = append(ac.WeightVersionOffsets, int64(len(ac.WeightVersion)))
}

// versionIndex is the index of weight version v in ac.VersionNames, added if new.
func (ac *ActorColumns) versionIndex(v string) int32 {
	k := slices.Index(ac.VersionNames, v)
	if k < 0 {
		k = len(ac.VersionNames)
		ac.VersionNames = append(ac.VersionNames, v)
	}
	return int32(k)
}

// weightVersions is record i's weight versions, never nil.
func (ac *ActorColumns) weightVersions(i int) []string {
	idx := ac.WeightVersion[ac.WeightVersionOffsets[i]:ac.WeightVersionOffsets[i+1]]
	out := make([]string, len(idx))
	for j, k := range idx {
		out[j] = ac.VersionNames[k]
	}
	return out
}
