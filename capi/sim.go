package main

/*
#include "focus.h"
*/
import "C"

import (
	"github.com/focus-go/focus-go/sim"
)

func simOf(h C.focus_handle) (*sim.Server, error) {
	return handleAs[*sim.Server](uint64(h), "simulated server")
}

//export focus_sim_start
func focus_sim_start(config *C.char, n C.size_t, out *C.focus_handle, info *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var cfg sim.Config
		if n > 0 {
			if err := decodeJSON(config, n, "simulated server config", &cfg); err != nil {
				return err
			}
		}
		s, err := sim.Start(cfg)
		if err != nil {
			return err
		}
		if err := returnJSON(info, map[string]any{"url": s.URL(), "model_dir": s.ModelDir(),
			"model_name": s.ModelName(), "eos": s.EOS(), "problems": s.Problems()}); err != nil {
			s.Close()
			return err
		}
		*out = C.focus_handle(handles.put(s))
		return nil
	})
}

//export focus_sim_stats
func focus_sim_stats(h C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		s, err := simOf(h)
		if err != nil {
			return err
		}
		return returnJSON(out, s.Stats())
	})
}

//export focus_sim_set_faults
func focus_sim_set_faults(h C.focus_handle, faults *C.char, n C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		s, err := simOf(h)
		if err != nil {
			return err
		}
		var fs []sim.Fault
		if err := decodeJSON(faults, n, "faults", &fs); err != nil {
			return err
		}
		return s.SetFaults(fs...)
	})
}
