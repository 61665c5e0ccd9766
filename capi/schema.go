package main

/*
#include "focus.h"
*/
import "C"

import "github.com/focus-go/focus-go/capi/binding"

// focus_schema returns the binding's schema (capi/binding.SchemaJSON): every JSON input
// with its fields, types and defaults, the rule kinds and defaults, the record keys.
//
//export focus_schema
func focus_schema(out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		setBytes(out, binding.SchemaJSON())
		return nil
	})
}
