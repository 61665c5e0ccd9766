package sim

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/focus-go/focus-go/core/status"
)

// vocab is the byte view of a byte-level BPE vocabulary: what each id decodes to, and a
// longest-prefix index the model uses to pick tokens for its text.
type vocab struct {
	tokens  [][]byte          // id → bytes (added tokens: their content)
	special []bool            // id → skipped by skip_special_tokens
	index   map[string]uint32 // bytes → id; regular tokens and non-special added tokens
	names   map[string]uint32 // added-token content → id (special ones included)
	maxLen  int
	eos     uint32
	trie    byteTrie // index as a trie: match walks it once instead of probing every length
}

// match returns the longest token that is a prefix of r and the next-longest one (-1 if
// none): the model's canonical choice and its non-canonical alternative.
func (v *vocab) match(r string) (int64, int64) {
	// Every key that is a prefix of r lies on r's path through the trie; the last two
	// met are the longest and the next-longest.
	g, alt := int64(-1), int64(-1)
	t := &v.trie
	n := int32(0)
	for i := 0; i < len(r); i++ {
		if n = t.next(n, r[i]); n < 0 {
			break
		}
		if id := t.nodes[n].id; id >= 0 {
			g, alt = int64(id), g
		}
	}
	return g, alt
}

// byteTrie is a read-only trie over byte strings, flattened into slices. Nodes with many
// children (the root, a space, a newline) look them up in a table, the rest scan their
// few edges.
type byteTrie struct {
	nodes []trieNode
	keys  []byte       // edge bytes; a node's edges are keys[lo:hi], sorted
	to    []int32      // edge targets, parallel to keys
	dense [][256]int32 // child by byte (-1: none) of the nodes with a table
}

type trieNode struct {
	id     int32 // the key ending here, -1: none
	lo, hi int32
	dense  int32 // index into dense, -1: none
}

// denseFrom is the number of children from which a node gets a table.
const denseFrom = 8

func (t *byteTrie) next(n int32, b byte) int32 {
	nd := &t.nodes[n]
	if nd.dense >= 0 {
		return t.dense[nd.dense][b]
	}
	for i := nd.lo; i < nd.hi; i++ {
		if t.keys[i] == b {
			return t.to[i]
		}
	}
	return -1
}

// buildTrie indexes keys (bytes → id).
func buildTrie(keys map[string]uint32) byteTrie {
	type building struct {
		id   int32
		kids map[byte]*building
	}
	root := &building{id: -1}
	for k, id := range keys {
		n := root
		for i := 0; i < len(k); i++ {
			c := n.kids[k[i]]
			if c == nil {
				if n.kids == nil {
					n.kids = map[byte]*building{}
				}
				c = &building{id: -1}
				n.kids[k[i]] = c
			}
			n = c
		}
		n.id = int32(id)
	}
	var t byteTrie
	// breadth first: a node's index is known before its edges are written
	queue := []*building{root}
	t.nodes = append(t.nodes, trieNode{id: root.id, dense: -1})
	for qi := 0; qi < len(queue); qi++ {
		n := queue[qi]
		bs := make([]int, 0, len(n.kids))
		for b := range n.kids {
			bs = append(bs, int(b))
		}
		sort.Ints(bs)
		lo := int32(len(t.keys))
		for _, b := range bs {
			idx := int32(len(t.nodes))
			c := n.kids[byte(b)]
			t.nodes = append(t.nodes, trieNode{id: c.id, dense: -1})
			queue = append(queue, c)
			t.keys = append(t.keys, byte(b))
			t.to = append(t.to, idx)
		}
		nd := &t.nodes[qi]
		nd.lo, nd.hi = lo, int32(len(t.keys))
		if len(bs) >= denseFrom {
			var table [256]int32
			for i := range table {
				table[i] = -1
			}
			for i := nd.lo; i < nd.hi; i++ {
				table[t.keys[i]] = t.to[i]
			}
			nd.dense = int32(len(t.dense))
			t.dense = append(t.dense, table)
		}
	}
	return t
}

// appendBytes appends the bytes of ids; out-of-range ids are skipped (callers validate).
func (v *vocab) appendBytes(dst []byte, ids []uint32, skipSpecial bool) []byte {
	for _, id := range ids {
		if int(id) >= len(v.tokens) || (skipSpecial && v.special[id]) {
			continue
		}
		dst = append(dst, v.tokens[id]...)
	}
	return dst
}

// text decodes ids the way a server's detokenizer does: bytes joined, invalid UTF-8 replaced.
func (v *vocab) text(ids []uint32, skipSpecial bool) string {
	return strings.ToValidUTF8(string(v.appendBytes(nil, ids, skipSpecial)), "\uFFFD")
}

func (v *vocab) size() int { return len(v.tokens) }

// byteUnicode is GPT-2's reversible byte ↔ printable-rune table used by byte-level BPE.
var byteUnicode = sync.OnceValues(func() ([256]rune, map[rune]byte) {
	var order []int
	var enc [256]rune
	dec := make(map[rune]byte, 256)
	inBase := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if inBase(b) {
			enc[b] = rune(b)
			order = append(order, b)
		}
	}
	for b := 0; b < 256; b++ {
		if !inBase(b) {
			enc[b] = rune(256 + n)
			n++
			order = append(order, b)
		}
	}
	for b := 0; b < 256; b++ {
		dec[enc[b]] = byte(b)
	}
	_ = order
	return enc, dec
})

// byteOrder is the id order of the 256 base tokens: printable bytes first, as in GPT-2.
func byteOrder() []byte {
	var out []byte
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			out = append(out, byte(b))
		}
	}
	for b := 0; b < 256; b++ {
		if !((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
			out = append(out, byte(b))
		}
	}
	return out
}

func toByteLevel(s string) string {
	enc, _ := byteUnicode()
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		sb.WriteRune(enc[s[i]])
	}
	return sb.String()
}

func fromByteLevel(s string) ([]byte, bool) {
	_, dec := byteUnicode()
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := dec[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// pretokenize splits text the way the Qwen2 pre-tokenizer regex does
// ((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+),
// hand-written because Go's regexp has no look-ahead. Only BPE training uses it; encoding
// is done by the tokenizers library with the regex itself.
func pretokenize(s string) []string {
	rs := []rune(s)
	var out []string
	for i := 0; i < len(rs); {
		j := pretokenEnd(rs, i)
		out = append(out, string(rs[i:j]))
		i = j
	}
	return out
}

func pretokenEnd(rs []rune, i int) int {
	isL, isN, isS := unicode.IsLetter, unicode.IsNumber, unicode.IsSpace
	nl := func(r rune) bool { return r == '\r' || r == '\n' }
	c := rs[i]
	if c == '\'' {
		rest := strings.ToLower(string(rs[i+1 : min(len(rs), i+3)]))
		for _, suf := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
			if strings.HasPrefix(rest, suf) {
				return i + 1 + len(suf)
			}
		}
	}
	letters := func(j int) int {
		for j < len(rs) && isL(rs[j]) {
			j++
		}
		return j
	}
	if isL(c) {
		return letters(i)
	}
	if !nl(c) && !isN(c) && i+1 < len(rs) && isL(rs[i+1]) {
		return letters(i + 1)
	}
	if isN(c) {
		return i + 1
	}
	j := i
	if c == ' ' {
		j++
	}
	k := j
	for k < len(rs) && !isS(rs[k]) && !isL(rs[k]) && !isN(rs[k]) {
		k++
	}
	if k > j {
		for k < len(rs) && nl(rs[k]) {
			k++
		}
		return k
	}
	if isS(c) {
		k, last := i, -1
		for k < len(rs) && isS(rs[k]) {
			if nl(rs[k]) {
				last = k
			}
			k++
		}
		switch {
		case last >= 0:
			return last + 1
		case k == len(rs) || k-i == 1:
			return k
		default:
			return k - 1
		}
	}
	return i + 1
}

// trainBPE learns up to maxMerges byte-level merges from corpus (pairs seen at least twice),
// ties broken by the pair's text so the result is deterministic.
func trainBPE(corpus []string, maxMerges int) [][2]string {
	counts := map[string]int{}
	for _, text := range corpus {
		for _, p := range pretokenize(text) {
			counts[toByteLevel(p)]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	type word struct {
		syms []string
		n    int
	}
	words := make([]word, len(keys))
	for i, k := range keys {
		var syms []string
		for _, r := range k {
			syms = append(syms, string(r))
		}
		words[i] = word{syms, counts[k]}
	}
	var merges [][2]string
	for len(merges) < maxMerges {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for j := 0; j+1 < len(w.syms); j++ {
				pairs[[2]string{w.syms[j], w.syms[j+1]}] += w.n
			}
		}
		var best [2]string
		bestN := 0
		for p, n := range pairs {
			if n > bestN || (n == bestN && p[0]+" "+p[1] < best[0]+" "+best[1]) {
				best, bestN = p, n
			}
		}
		if bestN < 2 {
			break
		}
		merges = append(merges, best)
		joined := best[0] + best[1]
		for i := range words {
			s := words[i].syms
			out := s[:0]
			for j := 0; j < len(s); j++ {
				if j+1 < len(s) && s[j] == best[0] && s[j+1] == best[1] {
					out = append(out, joined)
					j++
				} else {
					out = append(out, s[j])
				}
			}
			words[i].syms = out
		}
	}
	return merges
}

// addedToken is one tokenizer.json added token.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// The generated tokenizer's added tokens (ChatML, Qwen-style reasoning and tool tags).
var simAdded = []struct {
	content string
	special bool
}{
	{"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
	{"<think>", false}, {"</think>", false}, {"<tool_call>", false}, {"</tool_call>", false},
	{"<tool_response>", false}, {"</tool_response>", false},
}

const (
	maxMerges = 2000
	qwenSplit = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// generatedFiles are the files of the generated model directory; built once per process
// because training is deterministic.
var generatedFiles = sync.OnceValues(func() (map[string][]byte, error) {
	merges := trainBPE(trainingCorpus(), maxMerges)
	vocabMap := map[string]int{}
	var order []string
	for _, b := range byteOrder() {
		s := toByteLevel(string([]byte{b}))
		vocabMap[s] = len(order)
		order = append(order, s)
	}
	mergeStrs := make([]string, 0, len(merges))
	for _, m := range merges {
		mergeStrs = append(mergeStrs, m[0]+" "+m[1])
		if _, ok := vocabMap[m[0]+m[1]]; !ok {
			vocabMap[m[0]+m[1]] = len(order)
			order = append(order, m[0]+m[1])
		}
	}
	var added []addedToken
	for _, a := range simAdded {
		added = append(added, addedToken{ID: len(order) + len(added), Content: a.content, Special: a.special})
	}
	// vocab as an ordered JSON object (by id), as Hugging Face writes it
	var vb bytes.Buffer
	vb.WriteByte('{')
	for i, s := range order {
		if i > 0 {
			vb.WriteByte(',')
		}
		k, _ := json.Marshal(s)
		vb.Write(k)
		vb.WriteByte(':')
		vb.WriteString(itoa(i))
	}
	vb.WriteByte('}')
	tok := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenSplit}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": json.RawMessage(vb.Bytes()), "merges": mergeStrs},
	}
	tokJSON, err := json.MarshalIndent(tok, "", "  ")
	if err != nil {
		return nil, status.Wrap(status.Internal, err, "sim: encoding tokenizer.json")
	}
	decoder := map[string]any{}
	for _, a := range added {
		decoder[itoa(a.ID)] = map[string]any{"content": a.Content, "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": a.Special}
	}
	vocabSize := len(order) + len(added)
	cfg := map[string]any{
		"add_bos_token":                false,
		"add_prefix_space":             false,
		"added_tokens_decoder":         decoder,
		"additional_special_tokens":    []string{"<|im_start|>", "<|im_end|>"},
		"bos_token":                    nil,
		"chat_template":                chatTemplate,
		"clean_up_tokenization_spaces": false,
		"eos_token":                    "<|im_end|>",
		"errors":                       "replace",
		"model_max_length":             131072,
		"pad_token":                    "<|endoftext|>",
		"split_special_tokens":         false,
		"tokenizer_class":              "Qwen2Tokenizer",
		"unk_token":                    nil,
	}
	cfgJSON, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, status.Wrap(status.Internal, err, "sim: encoding tokenizer_config.json")
	}
	eos := len(order) + 2
	model := map[string]any{
		"architectures": []string{"Qwen2ForCausalLM"}, "model_type": "qwen2", "vocab_size": vocabSize,
		"bos_token_id": len(order), "eos_token_id": eos, "max_position_embeddings": 32768,
		"torch_dtype": "bfloat16", "_name_or_path": "focus-go/sim",
	}
	modelJSON, _ := json.MarshalIndent(model, "", "  ")
	gen, _ := json.MarshalIndent(map[string]any{"eos_token_id": []int{eos, len(order)}, "do_sample": true,
		"temperature": 1.0, "top_p": 1.0, "top_k": 0}, "", "  ")
	return map[string][]byte{
		"tokenizer.json":         tokJSON,
		"tokenizer_config.json":  cfgJSON,
		"config.json":            modelJSON,
		"generation_config.json": gen,
	}, nil
})

func itoa(i int) string {
	return string(appendInt(nil, int64(i)))
}

func appendInt(b []byte, i int64) []byte {
	if i < 0 {
		b = append(b, '-')
		i = -i
	}
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return append(b, buf[n:]...)
}

// writeModelDir writes the generated model files into dir.
func writeModelDir(dir string) error {
	files, err := generatedFiles()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return status.Wrap(status.InvalidArgument, err, "sim: cannot create model_dir %s", dir)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return status.Wrap(status.InvalidArgument, err, "sim: cannot write %s into model_dir %s", name, dir)
		}
	}
	return nil
}

// tokenizerFile is the part of tokenizer.json the simulator reads.
type tokenizerFile struct {
	AddedTokens []addedToken `json:"added_tokens"`
	Model       struct {
		Type  string         `json:"type"`
		Vocab map[string]int `json:"vocab"`
	} `json:"model"`
	Decoder json.RawMessage `json:"decoder"`
}

// loadVocab reads dir/tokenizer.json and dir/tokenizer_config.json (for eos_token and the
// chat template). Only byte-level BPE is accepted: the model works on bytes.
func loadVocab(dir string) (*vocab, string, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", status.Wrap(status.NotFound, err, "sim: cannot read %s", path)
	}
	var tf tokenizerFile
	if err := json.Unmarshal(data, &tf); err != nil {
		return nil, "", status.Wrap(status.InvalidArgument, err, "sim: %s is not a tokenizer.json", path)
	}
	if tf.Model.Type != "BPE" || !bytes.Contains(tf.Decoder, []byte(`"ByteLevel"`)) {
		return nil, "", status.Errorf(status.InvalidArgument,
			"sim: %s: model type %q with decoder %s; want byte-level BPE (GPT-2/Qwen/Llama-3 style)", path, tf.Model.Type, truncate(string(tf.Decoder), 80))
	}
	n := 0
	for _, id := range tf.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tf.AddedTokens {
		n = max(n, a.ID+1)
	}
	v := &vocab{tokens: make([][]byte, n), special: make([]bool, n), index: map[string]uint32{}, names: map[string]uint32{}}
	for s, id := range tf.Model.Vocab {
		b, ok := fromByteLevel(s)
		if !ok || id < 0 {
			return nil, "", status.Errorf(status.InvalidArgument, "sim: %s: vocab entry %q (id %d) is not byte-level", path, s, id)
		}
		v.tokens[id] = b
		if prev, dup := v.index[string(b)]; !dup || id < int(prev) {
			v.index[string(b)] = uint32(id)
		}
		v.maxLen = max(v.maxLen, len(b))
	}
	for _, a := range tf.AddedTokens {
		v.tokens[a.ID] = []byte(a.Content)
		v.special[a.ID] = a.Special
		v.names[a.Content] = uint32(a.ID)
		if !a.Special {
			v.index[a.Content] = uint32(a.ID)
			v.maxLen = max(v.maxLen, len(a.Content))
		}
	}
	for b := 0; b < 256; b++ {
		if _, ok := v.index[string([]byte{byte(b)})]; !ok {
			return nil, "", status.Errorf(status.InvalidArgument, "sim: %s: byte 0x%02x has no token; want a complete byte-level alphabet", path, b)
		}
	}
	v.trie = buildTrie(v.index)
	var cfg struct {
		EOS          json.RawMessage `json:"eos_token"`
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		_ = json.Unmarshal(raw, &cfg)
	}
	eosName := ""
	var s string
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(cfg.EOS, &s) == nil {
		eosName = s
	} else if json.Unmarshal(cfg.EOS, &obj) == nil {
		eosName = obj.Content
	}
	for _, name := range []string{eosName, "<|im_end|>", "<|endoftext|>"} {
		if id, ok := v.names[name]; ok && name != "" {
			v.eos = id
			eosName = name
			break
		}
		eosName = ""
	}
	if eosName == "" {
		return nil, "", status.Errorf(status.InvalidArgument, "sim: %s: no EOS token (tokenizer_config eos_token, <|im_end|> or <|endoftext|>)", dir)
	}
	template := ""
	if json.Unmarshal(cfg.ChatTemplate, &template) != nil {
		template = "" // a list of named templates or none: the simulator's own is used
	}
	return v, template, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// trainingCorpus is the text the generated tokenizer learns from: every line the model can
// write for the bundled problems, the prompts, the chat template's fixed text and a little
// ordinary prose, so tokens are realistic multi-character pieces.
func trainingCorpus() []string {
	var out []string
	for _, d := range bundled() {
		out = append(out, d.Prompt, "<think>\n"+d.plan+"\n</think>\n\n", d.Expression)
		walkScript(&sstate{def: d, slip: -1, intro: true}, 8, func(text string) { out = append(out, text) })
		out = append(out, (&sstate{def: d, kind: kindWrap}).children()[0].text)
	}
	for i := uint64(0); i < 8; i++ {
		d := genericProblem(i)
		walkScript(&sstate{def: d, slip: -1, intro: true}, 8, func(text string) { out = append(out, text) })
	}
	out = append(out, chatTemplateProse...)
	out = append(out, toolCallText("calculator", "expression", "(22 - 7) / 3", false))
	return out
}

// walkScript visits the texts of the script tree to the given depth, one wrong turn at most.
func walkScript(s *sstate, depth int, visit func(string)) {
	if depth == 0 || s == nil {
		return
	}
	for i, b := range s.children() {
		visit(b.text)
		if i == 0 || s.slip < 0 {
			walkScript(b.next, depth-1, visit)
		}
	}
}

var chatTemplateProse = []string{
	"You are a helpful assistant.",
	"Solve the problem. Put the final answer in \\boxed{}.",
	"Please reason step by step, and put your final answer within \\boxed{}.",
	"# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>",
	"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
	`{"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic expression.", "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "The expression to evaluate."}}, "required": ["expression"]}}}`,
	"system\n", "user\n", "assistant\n", "user\n", "assistant\n",
	"The weather in Paris is mild today. What is the temperature in the city, and should I take an umbrella?",
	"Let me think about this problem carefully before answering the question.",
	"The result of the calculation is shown below. Check the answer and try again if it is wrong.",
}
