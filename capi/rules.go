package main

/*
#include "focus.h"
*/
import "C"

import (
	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/collect"
)

// focus_rules_check validates one configuration object the binding declares (capi/binding.Check).
//
//export focus_rules_check
func focus_rules_check(kind *C.char, kindLen C.size_t, config *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		normalised, err := binding.Check(string(goBytes(kind, kindLen)), goBytes(config, n))
		if err != nil {
			return err
		}
		return returnJSON(out, normalised)
	})
}

// focus_rules_defaults returns the library's defaults (capi/binding.DefaultValues).
//
//export focus_rules_defaults
func focus_rules_defaults(out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		return returnJSON(out, binding.DefaultValues())
	})
}

// focus_rules_root_messages builds a collection's root conversation, with the env's reset
// observation where it goes (core/collect.RootMessages).
//
//export focus_rules_root_messages
func focus_rules_root_messages(request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var req binding.RootMessagesRequest
		if err := decodeJSON(request, n, "root messages request", &req); err != nil {
			return err
		}
		messages, err := collect.RootMessages(req.SystemPrompt, req.Prompt, req.Observation)
		if err != nil {
			return err
		}
		return returnJSON(out, messages)
	})
}
