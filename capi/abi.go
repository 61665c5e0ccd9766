package main

/*
#include <stdlib.h>
#include "focus.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"unsafe"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
)

// version is set at link time from the VERSION file (Makefile: -ldflags -X main.version=...).
var version = "dev"

const abiVersion = C.FOCUS_ABI_VERSION

func main() {}

// guard runs one export body: a returned error or a recovered panic becomes a status code
// and, when the caller passed an err slot, the error (focus_bytes, see errorPayload) it
// must free.
func guard(errOut *C.focus_bytes, body func() error) (code C.focus_status) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("focus: internal error (Go panic: %v)\n%s", r, debug.Stack())
			code = setError(errOut, status.Internal, msg, "")
		}
	}()
	if err := body(); err != nil {
		return setError(errOut, status.CodeOf(err), err.Error(), status.FieldOf(err))
	}
	return C.FOCUS_OK
}

func setError(errOut *C.focus_bytes, code status.Code, msg, field string) C.focus_status {
	if errOut != nil {
		setBytes(errOut, errorPayload(msg, field))
	}
	return C.focus_status(code)
}

// wireError is an error as the caller reads it from *err (focus.h).
type wireError struct {
	Message string `json:"message"`
	// Field is the configuration field the error is about (status.FieldOf); omitted
	// when it is about none.
	Field string `json:"field,omitempty"`
}

// errorJSON writes errors as they read: without escaping <, > and & (the standard
// library's HTML escaping, which jsonAPI keeps).
var errorJSON = jsoniter.Config{EscapeHTML: false}.Froze()

// errorPayload is the JSON of an error: {"message"} or {"message", "field"}.
func errorPayload(msg, field string) []byte {
	data, err := errorJSON.Marshal(wireError{Message: msg, Field: field})
	if err != nil { // two strings always encode; keep the message whatever happens
		return []byte(`{"message":"focus: the error could not be encoded"}`)
	}
	return data
}

// setBytes hands s to the caller as a focus_bytes: a malloc'd copy (freed with
// focus_string_free) and its length, with a NUL after the last byte that len does not
// count. s may hold NUL bytes. A NULL out panics before anything is allocated.
func setBytes[T ~string | ~[]byte](out *C.focus_bytes, s T) {
	out.len = 0
	n := len(s)
	buf := unsafe.Slice((*byte)(C.malloc(C.size_t(n+1))), n+1)
	copy(buf, s)
	buf[n] = 0
	out.data = (*C.char)(unsafe.Pointer(&buf[0]))
	out.len = C.size_t(n)
}

// goString copies a caller-owned string of n bytes (NUL bytes included).
func goString(p *C.char, n C.size_t) string { return string(goBytes(p, n)) }

// goBytes views a caller-owned buffer without copying; it must not outlive the call.
func goBytes(p *C.char, n C.size_t) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
}

//export focus_abi_version
func focus_abi_version() C.int32_t { return abiVersion }

//export focus_version
func focus_version(out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		if out == nil {
			return status.Errorf(status.InvalidArgument, "focus_version: out is NULL")
		}
		setBytes(out, version)
		return nil
	})
}

//export focus_handle_release
func focus_handle_release(h C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error { return handles.release(uint64(h)) })
}

//export focus_live_handles
func focus_live_handles() C.int64_t { return C.int64_t(handles.live()) }
