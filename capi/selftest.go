package main

/*
#include "focus.h"
*/
import "C"

import (
	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
)

// box is the self-test's handle kind: a decoded JSON value.
type box struct{ value any }

//export focus_selftest_panic
func focus_selftest_panic(message *C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error { panic(C.GoString(message)) })
}

//export focus_selftest_box
func focus_selftest_box(data *C.char, n C.size_t, out *C.focus_handle, errOut **C.char) C.focus_status {
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
func focus_selftest_unbox(h C.focus_handle, out **C.char, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		b, err := handleAs[*box](uint64(h), "selftest box")
		if err != nil {
			return err
		}
		data, err := jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(b.value)
		if err != nil {
			return err
		}
		*out = C.CString(string(data))
		return nil
	})
}
