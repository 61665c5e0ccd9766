package sim

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	jsoniter "github.com/json-iterator/go"
)

var jsonx = jsoniter.ConfigCompatibleWithStandardLibrary

// family is whose wire conventions an endpoint follows, for error shapes.
type family int

const (
	famPlain  family = iota // /health and friends: status only
	famSGLang               // native SGLang endpoints
	famVLLM                 // vLLM OpenAI-compatible completions and metadata
	famOpenAI               // OpenAI chat completions and responses
)

func familyOf(path string) family {
	switch path {
	case "/generate", "/abort_request", "/get_model_info", "/model_info", "/get_server_info", "/server_info", "/flush_cache", "/v1/loads":
		return famSGLang
	case "/v1/completions", "/v1/models", "/version":
		return famVLLM
	case "/v1/chat/completions", "/v1/responses":
		return famOpenAI
	}
	return famPlain
}

func jsonReply(code int, v any) reply {
	b, err := jsonx.Marshal(v)
	if err != nil {
		b = []byte(`{"error":{"message":"sim: encoding the response failed"}}`)
		code = 500
	}
	return reply{status: code, body: b}
}

// apiError is an error in whichever envelope the endpoint's server uses.
type apiError struct {
	status int
	msg    string
	typ    string // OpenAI type (invalid_request_error, ...); vLLM derives its own from status
	param  any
	code   any // OpenAI code string or nil
}

func (s *Server) errorReply(fam family, code int, msg, typ string, param any) reply {
	return s.apiErr(fam, apiError{status: code, msg: msg, typ: typ, param: param})
}

func (s *Server) apiErr(fam family, e apiError) reply {
	switch fam {
	case famSGLang:
		return jsonReply(e.status, map[string]any{"error": map[string]any{"message": e.msg}})
	case famVLLM:
		typ := vllmErrorType(e.status)
		if versionAtLeast(s.vllmVer, 0, 10, 1) {
			return jsonReply(e.status, struct {
				Error vllmErr `json:"error"`
			}{vllmErr{Message: e.msg, Type: typ, Param: e.param, Code: e.status}})
		}
		return jsonReply(e.status, vllmFlatErr{Object: "error", Message: e.msg, Type: typ, Param: e.param, Code: e.status})
	case famOpenAI:
		typ := e.typ
		if typ == "" || typ == "server_error" && e.status < 500 {
			typ = "invalid_request_error"
		}
		return jsonReply(e.status, struct {
			Error openaiErr `json:"error"`
		}{openaiErr{Message: e.msg, Type: typ, Param: e.param, Code: e.code}})
	}
	return reply{status: e.status}
}

type vllmErr struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    int    `json:"code"`
}

type vllmFlatErr struct {
	Object  string `json:"object"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    int    `json:"code"`
}

type openaiErr struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

func vllmErrorType(code int) string {
	switch code {
	case 400:
		return "BadRequestError"
	case 404:
		return "NotFoundError"
	case 429:
		return "RateLimitError"
	case 503:
		return "ServiceUnavailableError"
	}
	if code >= 500 {
		return "InternalServerError"
	}
	return "BadRequestError"
}

// validationReply is FastAPI's 422 for a body that does not fit the request schema.
func validationReply(loc, msg string) reply {
	return jsonReply(422, map[string]any{"detail": []any{map[string]any{
		"type": "value_error", "loc": []string{"body", loc}, "msg": msg, "input": nil}}})
}

// isNull reports an absent or null JSON value.
func isNull(raw json.RawMessage) bool {
	t := strings.TrimSpace(string(raw))
	return t == "" || t == "null"
}

// stringOrList reads a string | []string field.
func stringOrList(raw json.RawMessage) ([]string, bool) {
	if isNull(raw) {
		return nil, true
	}
	var one string
	if jsonx.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if jsonx.Unmarshal(raw, &many) == nil {
		return many, true
	}
	return nil, false
}

// tokenLists reads an []int | [][]int prompt; batch reports the second form.
func tokenLists(raw json.RawMessage) (lists [][]int64, batch bool, ok bool) {
	var many [][]int64
	if jsonx.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, true, true
	}
	var one []int64
	if jsonx.Unmarshal(raw, &one) == nil {
		return [][]int64{one}, false, true
	}
	return nil, false, false
}

func toIDs(xs []int64) ([]uint32, bool) {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		if x < 0 || x > 1<<32-1 {
			return nil, false
		}
		out[i] = uint32(x)
	}
	return out, true
}

// outputText is the response text: specials skipped on request, the EOS or stop token and
// a matched stop string trimmed unless keepStop.
func (s *Server) outputText(res genResult, skipSpecial, keepStop bool) string {
	ids := res.ids
	if !keepStop && res.matchedID >= 0 && len(ids) > 0 {
		ids = ids[:len(ids)-1]
	}
	text := s.decode(ids, skipSpecial)
	if !keepStop && res.hasStr {
		if i := strings.LastIndex(text, res.matchedStr); i >= 0 {
			text = text[:i]
		}
	}
	return text
}

// seedFor derives choice j's seed from a request seed (j = 0 keeps it).
func seedFor(seed uint64, j int) uint64 {
	if j == 0 {
		return seed
	}
	return splitmix(seed ^ uint64(j)*0x9e3779b97f4a7c15)
}

func (s *Server) nextID() uint64 { return s.requestSeq.Add(1) }

func hexID(n uint64) string { return strconv.FormatUint(splitmix(n), 16) }

func now() int64 { return time.Now().Unix() }

// floatList encodes floats compactly (hot path of every logprob response).
type floatList []float64

func (f floatList) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 12*len(f)+2)
	b = append(b, '[')
	for i, x := range f {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// triples encodes SGLang's [[logprob|null, token_id, text|null], ...].
type triples struct {
	lps   []float64
	ids   []uint32
	texts []string // nil: null texts
}

func (t triples) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, 24*len(t.ids)+2)), nil
}

func (t triples) appendJSON(b []byte) []byte {
	var ft floatText
	b = append(b, '[')
	for i, id := range t.ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		if lp := t.lps[i]; math.IsNaN(lp) || math.IsInf(lp, 0) || lp <= logFloor {
			// SGLang's orjson writes -inf and NaN as null (sglang 0.5.23
			// srt/utils/json_response.py dumps_json); the model's floor is its -inf.
			b = append(b, "null"...)
		} else {
			b = ft.append(b, lp)
		}
		b = append(b, ',')
		b = strconv.AppendUint(b, uint64(id), 10)
		b = append(b, ',')
		if t.texts != nil {
			q, _ := json.Marshal(t.texts[i])
			b = append(b, q...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

// floatText is strconv.AppendFloat(b, x, 'g', -1, 64) remembered for one list: a
// sequence's logprobs take few distinct values, and formatting each was a tenth of the
// cost of a reply.
type floatText struct {
	key  [64]uint64
	text [64][24]byte // the longest float64 in 'g' form has 24 bytes
	n    [64]uint8    // 0: empty
}

func (f *floatText) append(b []byte, x float64) []byte {
	bits := math.Float64bits(x)
	i := (bits * 0x9e3779b97f4a7c15) >> 58
	if f.n[i] > 0 && f.key[i] == bits {
		return append(b, f.text[i][:f.n[i]]...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, x, 'g', -1, 64)
	if n := len(b) - start; n <= len(f.text[i]) {
		f.key[i], f.n[i] = bits, uint8(n)
		copy(f.text[i][:], b[start:])
	}
	return b
}
