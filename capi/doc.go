// Command capi is the C ABI of focus-go: `go build -buildmode=c-shared ./capi` produces
// libfocus.so, whose contract is the hand-written focus.h beside this file. Each export
// decodes its arguments, calls one Go API, and encodes the result; decisions live in core/
// and backends/, never here.
//
// Every export is safe for concurrent calls and recovers panics into FOCUS_ERR_INTERNAL.
// Go objects cross as handles from one table (zero never valid, ids never reused, so a freed
// handle is rejected rather than aliased). Every string and byte payload crosses with its
// length (inputs as pointer + size_t, outputs and error messages as focus_bytes), so NUL
// bytes are data. Strings and buffers handed to the caller are C-allocated and freed by the
// matching focus_*_free export.
package main
