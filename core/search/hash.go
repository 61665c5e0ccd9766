package search

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Hash is H(seed, prompt_id, parts...) of ALGORITHM.md §5.7: a stable 64-bit
// hash used for sampler seeds and tie-breaks. It is the first 8 bytes, read
// big-endian, of the SHA-256 of this byte string:
//
//	u64(seed) ‖ u64(len(problemID)) ‖ problemID ‖ part ‖ part ‖ ...
//
// where u64 is 8 bytes big-endian and each part is a one-byte tag and a
// payload:
//
//	string                       's' u64(len) bytes
//	int, int8 ... int64          'i' u64(two's complement of the int64 value)
//	uint, uint8 ... uint64       'u' u64(value)
//	[]int (a path key)           'k' u64(len) u64(each element as int64)
//
// Lengths and tags make the encoding injective ("w", 1 never collides with
// "w1" or with the path key [1]), and nothing depends on the platform's int
// size, so the same inputs give the same value everywhere; Python reproduces
// it with hashlib.sha256(...).digest()[:8] and int.from_bytes(..., "big").
// Any other part type is a programming error and panics.
func Hash(seed uint64, problemID string, parts ...any) uint64 {
	var stack [128]byte
	b := binary.BigEndian.AppendUint64(stack[:0], seed)
	b = appendString(b, problemID)
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			b = appendString(append(b, 's'), v)
		case int:
			b = appendInt(b, int64(v))
		case int8:
			b = appendInt(b, int64(v))
		case int16:
			b = appendInt(b, int64(v))
		case int32:
			b = appendInt(b, int64(v))
		case int64:
			b = appendInt(b, v)
		case uint:
			b = appendUint(b, uint64(v))
		case uint8:
			b = appendUint(b, uint64(v))
		case uint16:
			b = appendUint(b, uint64(v))
		case uint32:
			b = appendUint(b, uint64(v))
		case uint64:
			b = appendUint(b, v)
		case []int:
			b = binary.BigEndian.AppendUint64(append(b, 'k'), uint64(len(v)))
			for _, x := range v {
				b = binary.BigEndian.AppendUint64(b, uint64(int64(x)))
			}
		default:
			panic(fmt.Sprintf("search.Hash: part of type %T is not encodable (want string, an integer or []int)", p))
		}
	}
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}

func appendString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...)
}

func appendInt(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 'i'), uint64(v))
}

func appendUint(b []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 'u'), v)
}

// WarmupSeed is the sampler seed of warmup rollout i: H(seed, prompt_id, "w", i).
func WarmupSeed(seed uint64, problemID string, i int) uint64 {
	return Hash(seed, problemID, "w", i)
}

// BranchSeed is the sampler seed of pick j of round t: H(seed, prompt_id, "b", t, j).
func BranchSeed(seed uint64, problemID string, round, j int) uint64 {
	return Hash(seed, problemID, "b", round, j)
}

// tieKey is H(seed, prompt_id, t, key(s)), the tie-break rank of node s in
// round t: the smallest wins.
func tieKey(seed uint64, problemID string, round int, key []int) uint64 {
	return Hash(seed, problemID, round, key)
}
