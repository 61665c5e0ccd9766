package sim

import jsoniter "github.com/json-iterator/go"

// /generate replies are most of what a busy server writes, and reflection-driven encoding
// of them was a sixth of its time. appendSglItems writes them with the same jsoniter
// stream primitives the reflective encoder uses (field by field, in declaration order),
// so the bytes are identical; encode_test.go compares the two.

// sglReply encodes one item (single) or the list.
func sglReply(items []sglItem, single bool) reply {
	// a stream of its own, sized for the reply, whose buffer becomes the body uncopied
	size := 64
	for i := range items {
		size += 256 + 2*len(items[i].Text) + 64*len(items[i].OutputIDs)
	}
	st := jsoniter.NewStream(jsonx, nil, size)
	if single {
		writeSglItem(st, &items[0])
	} else {
		st.WriteArrayStart()
		for i := range items {
			if i > 0 {
				st.WriteMore()
			}
			writeSglItem(st, &items[i])
		}
		st.WriteArrayEnd()
	}
	if st.Error != nil {
		// the reflective encoder reports the same failure the same way
		if single {
			return jsonReply(200, items[0])
		}
		return jsonReply(200, items)
	}
	return reply{status: 200, body: st.Buffer()}
}

func writeSglItem(st *jsoniter.Stream, it *sglItem) {
	st.WriteRaw(`{"text":`)
	st.WriteStringWithHTMLEscaped(it.Text)
	st.WriteRaw(`,"output_ids":`)
	if it.OutputIDs == nil {
		st.WriteNil()
	} else {
		st.WriteArrayStart()
		for i, id := range it.OutputIDs {
			if i > 0 {
				st.WriteMore()
			}
			st.WriteUint32(id)
		}
		st.WriteArrayEnd()
	}
	m := &it.MetaInfo
	st.WriteRaw(`,"meta_info":{"id":`)
	st.WriteStringWithHTMLEscaped(m.ID)
	st.WriteRaw(`,"finish_reason":`)
	switch f := m.FinishReason.(type) {
	case finishStop:
		st.WriteRaw(`{"type":`)
		st.WriteStringWithHTMLEscaped(f.Type)
		st.WriteRaw(`,"matched":`)
		st.WriteVal(f.Matched)
		st.WriteObjectEnd()
	case finishLength:
		st.WriteRaw(`{"type":`)
		st.WriteStringWithHTMLEscaped(f.Type)
		st.WriteRaw(`,"length":`)
		st.WriteInt(f.Length)
		st.WriteObjectEnd()
	default:
		st.WriteVal(f)
	}
	st.WriteRaw(`,"prompt_tokens":`)
	st.WriteInt(m.PromptTokens)
	st.WriteRaw(`,"completion_tokens":`)
	st.WriteInt(m.CompletionTokens)
	st.WriteRaw(`,"cached_tokens":`)
	st.WriteInt(m.CachedTokens)
	st.WriteRaw(`,"weight_version":`)
	st.WriteStringWithHTMLEscaped(m.WeightVersion)
	st.WriteRaw(`,"e2e_latency":`)
	st.WriteFloat64(m.E2ELatency)
	if m.OutputTokenLogprobs != nil {
		st.WriteRaw(`,"output_token_logprobs":`)
		writeMarshaler(st, *m.OutputTokenLogprobs)
	}
	if len(m.OutputTopLogprobs) > 0 {
		st.WriteRaw(`,"output_top_logprobs":`)
		writeTopList(st, m.OutputTopLogprobs)
	}
	if m.InputTokenLogprobs != nil {
		st.WriteRaw(`,"input_token_logprobs":`)
		writeMarshaler(st, *m.InputTokenLogprobs)
	}
	if len(m.InputTopLogprobs) > 0 {
		st.WriteRaw(`,"input_top_logprobs":`)
		writeTopList(st, m.InputTopLogprobs)
	}
	st.WriteRaw(`}}`)
}

// writeTopList writes [null | [[logprob, id, text], ...], ...].
func writeTopList(st *jsoniter.Stream, list []any) {
	st.WriteArrayStart()
	for i, x := range list {
		if i > 0 {
			st.WriteMore()
		}
		switch v := x.(type) {
		case nil:
			st.WriteNil()
		case triples:
			writeMarshaler(st, v)
		default:
			st.WriteVal(v)
		}
	}
	st.WriteArrayEnd()
}

// writeMarshaler writes t's MarshalJSON output straight into the stream's buffer (it never
// ends in the newline jsoniter would trim).
func writeMarshaler(st *jsoniter.Stream, t triples) {
	st.SetBuffer(t.appendJSON(st.Buffer()))
}
