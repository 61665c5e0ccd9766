package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/bridge"
	"github.com/focus-go/focus-go/core/status"
)

// recordingAnswerer keeps what answerBatch answered; ids in gone are no longer waited for.
type recordingAnswerer struct {
	resolved map[uint64]string
	answered map[uint64]bridge.Reply
	gone     map[uint64]bool
	broken   uint64 // Resolve of this id fails with an internal error
}

func newRecorder() *recordingAnswerer {
	return &recordingAnswerer{resolved: map[uint64]string{}, answered: map[uint64]bridge.Reply{}, gone: map[uint64]bool{}}
}

func (r *recordingAnswerer) Resolve(id uint64, payload []byte) error {
	if r.gone[id] {
		return status.Errorf(status.InvalidHandle, "no pending call %d", id)
	}
	if id == r.broken {
		return status.Errorf(status.Internal, "broken")
	}
	r.resolved[id] = string(payload)
	return nil
}

func (r *recordingAnswerer) Answer(id uint64, reply bridge.Reply) error {
	if r.gone[id] {
		return status.Errorf(status.InvalidHandle, "no pending call %d", id)
	}
	r.answered[id] = reply
	return nil
}

// One call answers JSON and generate replies in order, each with its own slice of the
// payload and of the ids/logprobs, copied (the caller's buffers are freed after the call).
func TestAnswerBatchSplitsTheArrays(t *testing.T) {
	r := newRecorder()
	payload := []byte(`{"reward":1}{"text":"ab"}{}{"text":""}`)
	tokens := []uint32{5, 6, 7}
	logprobs := []float64{-0.5, -1, -2}
	n, err := answerBatch(r, []uint64{3, 4, 9, 10}, payload, []uint64{12, 25, 27, 38}, []int64{-1, 3, -1, 0}, tokens, logprobs)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	assert.Equal(t, map[uint64]string{3: `{"reward":1}`, 9: `{}`}, r.resolved)
	assert.Equal(t, bridge.Reply{Payload: []byte(`{"text":"ab"}`), Tokens: []uint32{5, 6, 7}, Logprobs: []float64{-0.5, -1, -2}}, r.answered[4])
	assert.Equal(t, bridge.Reply{Payload: []byte(`{"text":""}`), Tokens: []uint32{}, Logprobs: []float64{}}, r.answered[10], "an empty generation is an empty array, not nil")
	tokens[0], logprobs[0], payload[14] = 99, 0, 'X'
	assert.Equal(t, []uint32{5, 6, 7}, r.answered[4].Tokens, "copied")
	assert.Equal(t, -0.5, r.answered[4].Logprobs[0], "copied")
	assert.Equal(t, `{"text":"ab"}`, string(r.answered[4].Payload), "copied")

	n, err = answerBatch(newRecorder(), nil, nil, nil, nil, nil, nil)
	require.NoError(t, err)
	assert.Zero(t, n, "an empty batch answers nothing")
}

// A request the engine stopped waiting for is skipped, as resolve's InvalidHandle is
// ignored by the Python driver; any other failure stops the batch with the answer named.
func TestAnswerBatchSkipsAbandonedRequests(t *testing.T) {
	r := newRecorder()
	r.gone[4] = true
	n, err := answerBatch(r, []uint64{3, 4, 5}, []byte(`{}{}{}`), []uint64{2, 4, 6}, []int64{-1, -1, 0}, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Contains(t, r.resolved, uint64(3))
	assert.Contains(t, r.answered, uint64(5))

	r = newRecorder()
	r.broken = 4
	n, err = answerBatch(r, []uint64{3, 4, 5}, []byte(`{}{}{}`), []uint64{2, 4, 6}, []int64{-1, -1, -1}, nil, nil)
	assert.Equal(t, 1, n)
	assert.Equal(t, status.Internal, status.CodeOf(err))
	assert.Contains(t, err.Error(), "answer 1 (request 4)")
}

// Arrays that do not fit together are refused whole, before anything is answered, with
// an error naming what is wrong.
func TestAnswerBatchRejectsBadLayouts(t *testing.T) {
	tests := []struct {
		name      string
		ids       []uint64
		payload   string
		ends      []uint64
		generated []int64
		tokens    []uint32
		logprobs  []float64
		wantErr   string
	}{
		{"ends count", []uint64{1, 2}, `{}{}`, []uint64{2}, []int64{-1, -1}, nil, nil, "2 ids but 1 payload ends and 2 generated counts"},
		{"generated count", []uint64{1}, `{}`, []uint64{2}, []int64{}, nil, nil, "1 ids but 1 payload ends and 0 generated counts"},
		{"logprob count", []uint64{1}, `{}`, []uint64{2}, []int64{2}, []uint32{1, 2}, []float64{-1}, "2 ids but 1 logprobs"},
		{"end past the payload", []uint64{1}, `{}`, []uint64{3}, []int64{-1}, nil, nil, "answer 0: payload end 3 is outside [0, 2]"},
		{"ends decrease", []uint64{1, 2}, `{}{}`, []uint64{4, 2}, []int64{-1, -1}, nil, nil, "answer 1: payload end 2 is outside [4, 4]"},
		{"negative count", []uint64{1}, `{}`, []uint64{2}, []int64{-2}, nil, nil, "answer 0: generated count -2"},
		{"count past the ids", []uint64{1, 2}, `{}{}`, []uint64{2, 4}, []int64{1, 2}, []uint32{1, 2}, []float64{-1, -1}, "answer 1: generated count 2, expected -1 (a JSON answer) or at most the 1 ids left of 2"},
		{"ids left over", []uint64{1}, `{}`, []uint64{2}, []int64{1}, []uint32{1, 2}, []float64{-1, -1}, "the answers take 1 ids but 2 were given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			n, err := answerBatch(r, tt.ids, []byte(tt.payload), tt.ends, tt.generated, tt.tokens, tt.logprobs)
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Zero(t, n)
			assert.Empty(t, r.resolved)
			assert.Empty(t, r.answered)
		})
	}
}

// The hand-written poll JSON reads back as the []polledRequest the general encoder writes,
// with every request's ids concatenated beside it.
func TestEncodePolledMatchesTheGeneralEncoder(t *testing.T) {
	reqs := []bridge.Request{
		{ID: 1, Kind: bridge.KindPolicyGenerate, Object: 3, Payload: []byte(`{"params":{"max_tokens":4},"id":"a\u00e9\"b"}`), Tokens: []uint32{1, 2, 3}},
		{ID: 2, Kind: bridge.KindEnvStep, Object: 4, Payload: []byte(`{"action":{"kind":"tokens","finished":false},"fork":true}`), Tokens: []uint32{}},
		{ID: 3, Kind: bridge.KindEnvClose, Object: -1, Payload: []byte(`{}`)},
		{ID: 18446744073709551615, Kind: bridge.KindCancel, Object: 9, Payload: nil},
		{ID: 5, Kind: bridge.KindEnvStep, Object: 4, Payload: []byte(`{"action":{"kind":"text","text":"<b>&</b>"}}`), Tokens: []uint32{7}},
	}
	data, ids, err := encodePolled(reqs)
	require.NoError(t, err)
	assert.Equal(t, []uint32{1, 2, 3, 7}, ids)
	want := make([]polledRequest, len(reqs))
	at := 0
	for i, r := range reqs {
		want[i].Request = r
		if r.Tokens != nil {
			want[i].Tokens = &[2]int{at, at + len(r.Tokens)}
			at += len(r.Tokens)
		}
	}
	general, err := jsonAPI.Marshal(want)
	require.NoError(t, err)
	var got, expected any
	require.NoError(t, jsonAPI.Unmarshal(data, &got))
	require.NoError(t, jsonAPI.Unmarshal(general, &expected))
	assert.Equal(t, expected, got)

	data, ids, err = encodePolled(nil)
	require.NoError(t, err)
	assert.Equal(t, "[]", string(data))
	assert.Nil(t, ids)

	_, _, err = encodePolled([]bridge.Request{{ID: 1, Kind: `x"y`}})
	assert.Equal(t, status.Internal, status.CodeOf(err))
}

// Any arrays are either refused whole with InvalidArgument or answered in full: never a
// panic, never an answer from a refused batch.
func FuzzAnswerBatch(f *testing.F) {
	f.Add([]byte{2, 4, 0}, []byte("{}{}"), []byte{1, 0xff}, uint8(1))
	f.Add([]byte{9}, []byte("{}"), []byte{0xfe}, uint8(0))
	f.Fuzz(func(t *testing.T, endBytes, payload, genBytes []byte, nTokens uint8) {
		n := min(len(endBytes), len(genBytes))
		ids := make([]uint64, n)
		ends := make([]uint64, n)
		generated := make([]int64, n)
		for i := range n {
			ids[i] = uint64(i + 1)
			ends[i] = uint64(endBytes[i])
			generated[i] = int64(int8(genBytes[i]))
		}
		tokens := make([]uint32, nTokens)
		logprobs := make([]float64, nTokens)
		r := newRecorder()
		count, err := answerBatch(r, ids, payload, ends, generated, tokens, logprobs)
		if err != nil {
			require.Equal(t, status.InvalidArgument, status.CodeOf(err), err.Error())
			require.Zero(t, count)
			require.Empty(t, r.resolved)
			require.Empty(t, r.answered)
			return
		}
		require.Equal(t, n, count)
		require.Equal(t, n, len(r.resolved)+len(r.answered))
	})
}
