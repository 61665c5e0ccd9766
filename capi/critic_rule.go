package main

/*
#include "focus.h"
*/
import "C"

import (
	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/prepare"
)

// focus_critic_fit returns the tree's sums behind kappa_hat, at kappa 0 (prepare.TreeCriticFit).
//
//export focus_critic_fit
func focus_critic_fit(h C.focus_handle, reward *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		t, err := treeOf(h)
		if err != nil {
			return err
		}
		cfg, err := rewardConfig(reward, n)
		if err != nil {
			return err
		}
		fit, err := prepare.TreeCriticFit(t, cfg)
		if err != nil {
			return err
		}
		return returnJSON(out, fit)
	})
}

// focus_critic_rule observes a batch's fits (if any) and chooses the next batch's kappa
// and estimator (capi/binding.CriticRule, prepare.CriticRule).
//
//export focus_critic_rule
func focus_critic_rule(request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var req binding.CriticRuleRequest
		if err := decodeJSON(request, n, "critic rule request", &req); err != nil {
			return err
		}
		answer, err := binding.CriticRule(req)
		if err != nil {
			return err
		}
		return returnJSON(out, answer)
	})
}
