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
		g := mathenv.GradeEpisode(req.Text, req.Label)
		answer := ""
		if g.Info.Answer != nil {
			answer = *g.Info.Answer
		}
		return returnJSON(out, map[string]any{"answer": answer, "correct": g.Info.Correct, "reward": g.Reward, "done": g.Done, "info": g.Info})
	})
}
