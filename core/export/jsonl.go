package export

import (
	"io"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/prepare"
)

// jsonlAPI writes floats in their shortest exact form (lossless) and leaves
// HTML characters unescaped, as files need no script-safe escaping.
var jsonlAPI = jsoniter.Config{EscapeHTML: false}.Froze()

// flushAt bounds the stream's buffer: records are written out in chunks
// instead of being held whole in memory.
const flushAt = 1 << 16

// WriteJSONL writes every record of f as one JSON object per line, actor
// records first, with the binding keys in the documented order.
func WriteJSONL(w io.Writer, f *Flat) error {
	s := jsoniter.NewStream(jsonlAPI, w, flushAt+4096)
	ac := &f.Actor
	for i := range f.NumActor() {
		lo, hi := ac.Offsets[i], ac.Offsets[i+1]
		context := int(ac.SpanStart[i])
		mlo, mhi := ac.SpanOffsets[i], ac.SpanOffsets[i+1]
		s.WriteObjectStart()
		s.WriteObjectField("tokens")
		s.WriteArrayStart()
		for j, t := range ac.Tokens[lo:hi] {
			if j > 0 {
				s.WriteMore()
			}
			s.WriteUint32(t)
		}
		s.WriteArrayEnd()
		s.WriteMore()
		s.WriteObjectField("loss_mask")
		s.WriteArrayStart()
		for j := range context {
			if j > 0 {
				s.WriteMore()
			}
			s.WriteFalse()
		}
		for j, m := range ac.SpanMask[mlo:mhi] {
			if j+context > 0 {
				s.WriteMore()
			}
			s.WriteBool(m)
		}
		s.WriteArrayEnd()
		s.WriteMore()
		s.WriteObjectField("behavior_logprobs")
		s.WriteArrayStart()
		for j := range context {
			if j > 0 {
				s.WriteMore()
			}
			s.WriteRaw("0")
		}
		for j, lp := range ac.SpanLogprobs[mlo:mhi] {
			if j+context > 0 {
				s.WriteMore()
			}
			s.WriteFloat64(lp)
		}
		s.WriteArrayEnd()
		s.WriteMore()
		s.WriteObjectField("advantage")
		s.WriteFloat64(ac.Advantage[i])
		s.WriteMore()
		s.WriteObjectField(LaneKey)
		s.WriteString(LaneActor)
		s.WriteMore()
		s.WriteObjectField("group_index")
		s.WriteInt(f.GroupIndex)
		s.WriteMore()
		s.WriteObjectField(EstimatorKey)
		s.WriteString(f.Estimators[ac.Estimator[i]])
		s.WriteMore()
		s.WriteObjectField("node_id")
		s.WriteInt64(ac.NodeID[i])
		s.WriteMore()
		s.WriteObjectField("search_pass")
		if p := ac.SearchPass[i]; p == prepare.NoSearchPass {
			s.WriteNil()
		} else {
			s.WriteInt64(p)
		}
		s.WriteMore()
		s.WriteObjectField("problem_id")
		s.WriteString(f.ProblemID)
		s.WriteObjectEnd()
		if err := endLine(s); err != nil {
			return err
		}
	}
	cc := &f.Critic
	for i := range f.NumCritic() {
		s.WriteObjectStart()
		s.WriteObjectField("context")
		s.WriteString(string(cc.Context[cc.Offsets[i]:cc.Offsets[i+1]]))
		s.WriteMore()
		s.WriteObjectField("target")
		s.WriteFloat64(cc.Target[i])
		s.WriteMore()
		s.WriteObjectField(LaneKey)
		s.WriteString(LaneCritic)
		s.WriteMore()
		s.WriteObjectField("group_index")
		s.WriteInt(f.GroupIndex)
		s.WriteMore()
		s.WriteObjectField("node_id")
		s.WriteInt64(cc.NodeID[i])
		s.WriteMore()
		s.WriteObjectField("problem_id")
		s.WriteString(f.ProblemID)
		s.WriteObjectEnd()
		if err := endLine(s); err != nil {
			return err
		}
	}
	return s.Flush()
}

func endLine(s *jsoniter.Stream) error {
	s.WriteRaw("\n")
	if s.Error != nil {
		return s.Error
	}
	if s.Buffered() >= flushAt {
		return s.Flush()
	}
	return nil
}
