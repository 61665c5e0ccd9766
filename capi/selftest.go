//go:build focus_selftest

package main

/*
#include "focus.h"
*/
import "C"

import (
	"os"
	"runtime/pprof"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// The focus_selftest_* exports exist only in a library built with -tags focus_selftest
// (make selftest-lib), which the Python tests and benchmarks load; the shipped
// libfocus.so holds no test code (capi/release_test.go, tests/test_release_library.py).

// box is the self-test's handle kind: a decoded JSON value.
type box struct{ value any }

//export focus_selftest_panic
func focus_selftest_panic(message *C.char, messageLen C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error { panic(goString(message, messageLen)) })
}

//export focus_selftest_box
func focus_selftest_box(data *C.char, n C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var v any
		if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(goBytes(data, n), &v); err != nil {
			return status.Wrap(status.InvalidArgument, err, "selftest: bad JSON")
		}
		*out = C.focus_handle(handles.put(&box{value: v}))
		return nil
	})
}

//export focus_selftest_unbox
func focus_selftest_unbox(h C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		b, err := handleAs[*box](uint64(h), "selftest box")
		if err != nil {
			return err
		}
		data, err := jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(b.value)
		if err != nil {
			return err
		}
		setBytes(out, data)
		return nil
	})
}

// focus_selftest_search_tree builds a benchmark-sized tree shaped like a Selective search
// (core/tree/treetest.Search): half root chains, half branches, `segments` edges of `tokens`
// generated tokens per rollout. Used by benchmarks/ to measure preparation and export
// through the C boundary without collecting first.
//
//export focus_selftest_search_tree
func focus_selftest_search_tree(rollouts, segments, tokens C.int64_t, seed C.uint64_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		if rollouts < 1 || segments < 1 || tokens < 1 {
			return status.Errorf(status.InvalidArgument, "selftest: rollouts, segments and tokens must be >= 1")
		}
		*out = C.focus_handle(handles.put(treetest.Search(int(rollouts), int(segments), int(tokens), uint64(seed))))
		return nil
	})
}

// cpuProfile is the file focus_selftest_cpu_profile is writing, if any.
var cpuProfile *os.File

// focus_selftest_cpu_profile starts a pprof CPU profile of the library's Go code into the
// file at path, or with an empty path stops the one running (benchmarks: where the Go
// time of a collection driven from Python goes).
//
//export focus_selftest_cpu_profile
func focus_selftest_cpu_profile(path *C.char, n C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		name := goString(path, n)
		if name == "" {
			if cpuProfile == nil {
				return status.Errorf(status.InvalidArgument, "selftest: no CPU profile is running")
			}
			pprof.StopCPUProfile()
			err := cpuProfile.Close()
			cpuProfile = nil
			return err
		}
		if cpuProfile != nil {
			return status.Errorf(status.InvalidArgument, "selftest: a CPU profile is already running")
		}
		f, err := os.Create(name)
		if err != nil {
			return status.Wrap(status.NotFound, err, "selftest: CPU profile file")
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return status.Wrap(status.Internal, err, "selftest: start CPU profile")
		}
		cpuProfile = f
		return nil
	})
}
