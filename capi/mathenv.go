package main

/*
#include "focus.h"
*/
import "C"

import "github.com/focus-go/focus-go/core/mathenv"

//export focus_math_grade
func focus_math_grade(request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var req struct {
			Text  string `json:"text"`
			Label string `json:"label"`
		}
		if err := decodeJSON(request, n, "math grade request", &req); err != nil {
			return err
		}
		answer, correct := mathenv.Grade(req.Text, req.Label)
		return returnJSON(out, map[string]any{"answer": answer, "correct": correct})
	})
}
