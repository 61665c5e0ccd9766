package main

/*
#include "focus.h"
*/
import "C"

import (
	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/mathenv"
)

//export focus_math_grade
func focus_math_grade(request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var req binding.GradeRequest
		if err := decodeJSON(request, n, "math grade request", &req); err != nil {
			return err
		}
		return returnGrade(out, req.Text, req.Label)
	})
}

// focus_math_grade_text is focus_math_grade with the text and label as length-delimited
// UTF-8 strings instead of a JSON request (a 1,000-character response full of LaTeX
// backslashes costs more to decode from JSON than to grade).
//
//export focus_math_grade_text
func focus_math_grade_text(text *C.char, textLen C.size_t, label *C.char, labelLen C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		return returnGrade(out, goString(text, textLen), goString(label, labelLen))
	})
}

func returnGrade(out *C.focus_bytes, text, label string) error {
	g := mathenv.GradeEpisode(text, label)
	answer := ""
	if g.Info.Answer != nil {
		answer = *g.Info.Answer
	}
	return returnJSON(out, map[string]any{"answer": answer, "correct": g.Info.Correct, "reward": g.Reward, "done": g.Done, "info": g.Info})
}
