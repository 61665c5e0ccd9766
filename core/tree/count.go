package tree

import "unsafe"

// countTrue counts the true values of m eight at a time: a Go bool is one byte
// holding 0 or 1, and trainable masks are most of a tree's bytes, so reading
// them a word at a time keeps a pass over a tree's tokens well below its node pass.
func countTrue(m []bool) int {
	n, i := 0, 0
	for ; i < len(m) && uintptr(unsafe.Pointer(&m[i]))%8 != 0; i++ {
		if m[i] {
			n++
		}
	}
	m = m[i:]
	words := len(m) / 8
	if words > 0 {
		w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(m))), words)
		for len(w) > 0 {
			// Each byte lane of acc counts the true values at its position;
			// 255 words keep every lane below overflow.
			chunk := w[:min(len(w), 255)]
			w = w[len(chunk):]
			var acc uint64
			for _, x := range chunk {
				// Fold each byte onto its lowest bit: any nonzero byte counts
				// as true, even one not written by Go.
				x |= x >> 4
				x |= x >> 2
				x |= x >> 1
				acc += x & 0x0101010101010101
			}
			// Add the eight lanes: pairs into 16-bit lanes, then those four.
			acc = (acc & 0x00ff00ff00ff00ff) + (acc >> 8 & 0x00ff00ff00ff00ff)
			n += int((acc * 0x0001000100010001) >> 48)
		}
	}
	for _, b := range m[words*8:] {
		if b {
			n++
		}
	}
	return n
}
