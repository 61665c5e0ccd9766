package transport

import (
	"strconv"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
)

// NumberReader reads JSON numbers as the nearest float64, exactly as strconv.ParseFloat
// does, reusing one buffer. Servers print logprobs with full round-trip precision (17 or
// more digits), which json-iterator's fast path declines and its slow path reads through a
// freshly allocated string for every number. The zero value is ready; not safe for
// concurrent use.
type NumberReader struct{ buf []byte }

// Float64 reads the next value of iter, which must be a number.
func (r *NumberReader) Float64(iter *jsoniter.Iterator) float64 {
	if r.buf == nil {
		r.buf = make([]byte, 0, 32) // json-iterator treats a nil buffer as "not capturing"
	}
	r.buf = iter.SkipAndAppendBytes(r.buf[:0])
	if iter.Error != nil {
		return 0
	}
	if len(r.buf) == 0 || (r.buf[0] != '-' && (r.buf[0] < '0' || r.buf[0] > '9')) {
		iter.ReportError("Float64", "expected a number")
		return 0
	}
	v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(r.buf), len(r.buf)), 64)
	if err != nil {
		iter.ReportError("Float64", err.Error())
		return 0
	}
	return v
}
