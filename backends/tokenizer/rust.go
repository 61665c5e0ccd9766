package tokenizer

// The cgo binding of ffi/ (focus_tokenizer.h): every text and id array crosses as pointer +
// length, and everything Rust allocates is copied into Go memory and freed at once.

/*
#cgo LDFLAGS: -L${SRCDIR}/../../build -lfocus_tokenizer -ldl -lm
#include <stdlib.h>
#include "ffi/focus_tokenizer.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// rustTokenizer owns one ftk_tokenizer. It is immutable once loaded; close must not race
// with use (Tokenizer's lock sees to that).
type rustTokenizer struct{ p *C.ftk_tokenizer }

// rustError takes an error message Rust allocated.
func rustError(msg *C.uint8_t, n C.size_t) error {
	defer C.ftk_bytes_free(msg, n)
	return errors.New(string(unsafe.Slice((*byte)(unsafe.Pointer(msg)), int(n))))
}

// bytesArg passes Go bytes to C for the duration of one call (NULL when empty).
func bytesArg(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}

// stringArg is bytesArg for a string, without copying it.
func stringArg(s string) *C.uint8_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(unsafe.StringData(s)))
}

func loadRust(data []byte) (*rustTokenizer, error) {
	var msg *C.uint8_t
	var n C.size_t
	p := C.ftk_tokenizer_load(bytesArg(data), C.size_t(len(data)), &msg, &n)
	if p == nil {
		return nil, rustError(msg, n)
	}
	return &rustTokenizer{p: p}, nil
}

func (r *rustTokenizer) vocabSize() int { return int(C.ftk_vocab_size(r.p)) }

func (r *rustTokenizer) encode(text string, addSpecial bool) ([]uint32, error) {
	var ids *C.uint32_t
	var count, n C.size_t
	var msg *C.uint8_t
	if C.ftk_encode(r.p, stringArg(text), C.size_t(len(text)), cBool(addSpecial), &ids, &count, &msg, &n) != 0 {
		return nil, rustError(msg, n)
	}
	if count == 0 {
		return []uint32{}, nil
	}
	defer C.ftk_ids_free(ids, count)
	return append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(ids)), int(count))...), nil
}

func (r *rustTokenizer) decode(ids []uint32, skipSpecial bool) (string, error) {
	var in *C.uint32_t
	if len(ids) > 0 {
		in = (*C.uint32_t)(unsafe.Pointer(&ids[0]))
	}
	var out, msg *C.uint8_t
	var outLen, n C.size_t
	if C.ftk_decode(r.p, in, C.size_t(len(ids)), cBool(skipSpecial), &out, &outLen, &msg, &n) != 0 {
		return "", rustError(msg, n)
	}
	if outLen == 0 {
		return "", nil
	}
	defer C.ftk_bytes_free(out, outLen)
	return C.GoStringN((*C.char)(unsafe.Pointer(out)), C.int(outLen)), nil
}

func (r *rustTokenizer) close() { C.ftk_tokenizer_free(r.p) }

func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}
