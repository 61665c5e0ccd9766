package sim

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkFastDecode fails when the fast path accepts a body the general decoder reads
// differently (or rejects).
func checkFastDecode(t testing.TB, body []byte) bool {
	var fast, slow generateReq
	scanned, ok := fastGenerateReq(body, &fast)
	if !ok {
		return false
	}
	require.NoError(t, jsonx.Unmarshal(body, &slow), "fast path accepted %q", body)
	require.Equal(t, slow, fast, "body %q", body)
	ids, ok := flatIDs(fast.InputIDs)
	if scanned != nil {
		require.True(t, ok, "ids read on the way from %q", fast.InputIDs)
		require.Equal(t, ids, scanned)
	}
	if ok {
		require.NotNil(t, scanned, "ids of %q read on the way", fast.InputIDs)
		lists, batch, ok := tokenLists(fast.InputIDs)
		require.True(t, ok, "%q", fast.InputIDs)
		require.False(t, batch)
		require.Len(t, lists, 1)
		want, ok := toIDs(lists[0])
		require.True(t, ok)
		require.Equal(t, want, ids, "%q", fast.InputIDs)
	}
	return true
}

var decodeSeeds = []string{
	`{"rid":"t1","input_ids":[1,2,3],"return_logprob":true,"logprob_start_len":-1,"top_logprobs_num":0,"return_text_in_logprobs":false,"stream":false,"sampling_params":{"max_new_tokens":256,"temperature":1,"stop":[],"sampling_seed":5}}`,
	` { "input_ids" : [ 0 , 4294967295 ] , "text" : null } `,
	`{"input_ids":[]}`, `{}`, `{"input_ids":[[1,2],[3]]}`, `{"input_ids":[1,-2]}`, `{"input_ids":[4294967296]}`,
	`{"input_ids":[01]}`, `{"input_ids":[1.0]}`, `{"input_ids":[1e2]}`, `{"Input_IDs":[1]}`, `{"input_ids":[1],"input_ids":[2]}`,
	`{"text":"Solve \"3x\" \u00e9\n","rid":["a","b"]}`, `{"text":"caf` + "\xc3\xa9" + `"}`, `{"stream":true}`, `{"stream":null}`,
	`{"logprob_start_len":1.5}`, `{"logprob_start_len":-0}`, `{"logprob_start_len":"1"}`, `{"sampling_params":{"a":[{},[],"x",-1.5e+3]}}`,
	`{"input_ids":[1]} x`, `{"input_ids":[1],}`, `{"input_ids":[1,]}`, `[1]`, `null`, `{"rid":"\x01"}`, `{"rid":"\q"}`,
	`{"return_logprob":[true,false],"top_logprobs_num":[1,2]}`, `{"extra":1}`,
}

// TestFastGenerateDecode checks the fast path against the general decoder on hand-picked
// bodies, the golden requests, and random mutations of both.
func TestFastGenerateDecode(t *testing.T) {
	bodies := [][]byte{}
	for _, s := range decodeSeeds {
		bodies = append(bodies, []byte(s))
	}
	for _, r := range readGolden(t) {
		if r.Path == "/generate" {
			bodies = append(bodies, r.Body)
		}
	}
	rng := rand.New(rand.NewSource(2))
	alphabet := []byte(` ,:[]{}"\-.e0123456789tfnul` + "\t\n\x00\xff")
	accepted := 0
	for _, b := range bodies {
		if checkFastDecode(t, b) {
			accepted++
		}
		for k := 0; k < 200; k++ {
			m := bytes.Clone(b)
			for n := 1 + rng.Intn(3); n > 0 && len(m) > 0; n-- {
				i := rng.Intn(len(m))
				switch rng.Intn(3) {
				case 0:
					m[i] = alphabet[rng.Intn(len(alphabet))]
				case 1:
					m = append(m[:i], m[i+1:]...)
				default:
					m = append(m[:i], append([]byte{alphabet[rng.Intn(len(alphabet))]}, m[i:]...)...)
				}
			}
			checkFastDecode(t, m)
		}
	}
	require.Greater(t, accepted, len(bodies)/2, "the fast path takes the usual requests")
}

func FuzzFastGenerateDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkFastDecode(t, body) })
}
