package fleet

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// One policy per data set: every replica of a fleet must serve the same model, so that no
// data set mixes the samples of two policies. A replica's Identity (what its server says
// it serves) is compared with the fleet's at start-up (StartupCheck), again each time a
// replica comes back after being down (its probe first runs its Check), and on every
// answer that names the weight version that produced it (SGLang's meta_info
// weight_version). A replica that differs is refused, naming both identities: at start-up
// the check fails; later the replica gets no more requests and its request fails over.
// A new weight version is refused too unless Config.AllowWeightChange is set; then each
// Result says which version produced it and Load lists every version seen. A replica that
// does not say which model it serves cannot be compared: Load.Warnings says so, once.

// Identity is the model a replica serves, as its server reports it; "" where it does not
// say (vLLM reports no tokenizer and no weight version).
type Identity struct {
	// Model is the served model path or name (SGLang's model_path, vLLM's model root).
	Model string `json:"model"`
	// Tokenizer is the tokenizer path (SGLang's tokenizer_path).
	Tokenizer string `json:"tokenizer,omitempty"`
	// WeightVersion is the weights' version (SGLang's weight_version; a trainer sets it
	// with each weight update).
	WeightVersion string `json:"weight_version,omitempty"`
}

func (id Identity) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %q", id.Model)
	if id.Tokenizer != "" && id.Tokenizer != id.Model {
		fmt.Fprintf(&b, ", tokenizer %q", id.Tokenizer)
	}
	if id.WeightVersion != "" {
		fmt.Fprintf(&b, ", weight version %q", id.WeightVersion)
	}
	return b.String()
}

// sameName reports whether two model (or tokenizer) paths name the same one: equal once
// cleaned (a trailing slash, "./" and ".." spelled out), or one of them not known.
// Different directories or organisations holding a model of the same name
// (/ckpt/iter_100/hf and /ckpt/iter_200/hf, orgA/M and orgB/M) are different models.
func sameName(x, y string) bool {
	return x == "" || y == "" || clean(x) == clean(y)
}

func clean(p string) string { return path.Clean(strings.ReplaceAll(p, "\\", "/")) }

// differs names the first part of got that differs from ref ("" when none does); a part
// either side does not report is not compared.
func differs(ref, got Identity) string {
	switch {
	case !sameName(ref.Model, got.Model):
		return "model"
	case !sameName(ref.Tokenizer, got.Tokenizer):
		return "tokenizer"
	case ref.WeightVersion != "" && got.WeightVersion != "" && ref.WeightVersion != got.WeightVersion:
		return "weight version"
	}
	return ""
}

// refusal is a replica refused for serving another model: its request fails over, and
// it gets no more requests.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// StartupCheck runs every replica's Check in order and returns what each server said. A
// capacity a server reports replaces the replica's configured one (the caller's figure is
// for servers that do not say). The first replica that fails ends the check with its error.
// Every replica must serve the Identity of the first that names its model: a replica of
// another model, tokenizer or weight version (the last one unless Config.AllowWeightChange)
// is a status.InvalidArgument error naming both identities, since its samples would mix two
// policies in one data set.
func (f *Fleet) StartupCheck(ctx context.Context) ([]any, error) {
	infos := make([]any, len(f.reps))
	for i, r := range f.reps {
		if r.Check == nil {
			f.mu.Lock()
			f.unknown(i)
			f.mu.Unlock()
			continue
		}
		c, err := r.Check(ctx)
		if err != nil {
			if len(f.reps) > 1 {
				return nil, status.Wrap(status.CodeOf(err), err, "fleet: replica %d of %d (%s)", i+1, len(f.reps), r.Name)
			}
			return nil, err
		}
		infos[i] = c.Info
		if err := f.compare(i, c.identity(), "serves"); err != nil {
			return nil, err.error
		}
		f.SetCapacity(i, c.Capacity)
	}
	return infos, nil
}

func (c Checked) identity() Identity {
	return Identity{Model: c.Model, Tokenizer: c.Tokenizer, WeightVersion: c.WeightVersion}
}

// compare records replica i's identity id (what it "serves", "came back serving" or
// "answered with") and compares it with the fleet's: a difference is a refusal naming
// both, and the replica keeps its refusal (it gets no more requests). The first identity
// that names its model becomes the fleet's; parts it left unknown are filled in from
// later replicas, and an allowed new weight version replaces the fleet's.
func (f *Fleet) compare(i int, id Identity, how string) *refusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reps[i]
	if r.refused != nil {
		return r.refused
	}
	if id.Model == "" {
		id.Model = r.ident.Model // an answer names its weight version alone
		id.Tokenizer = r.ident.Tokenizer
	}
	r.ident = id
	if id.Model == "" {
		f.unknown(i) // its weight version is still compared
	}
	if f.from < 0 {
		if id.Model != "" {
			f.ident, f.from = id, i
		}
		f.version(id.WeightVersion)
		return nil
	}
	part := differs(f.ident, id)
	if part == "weight version" && f.allowWeights {
		part = ""
	}
	if part == "" {
		f.ident.Tokenizer = cmp(f.ident.Tokenizer, id.Tokenizer)
		if id.WeightVersion != "" {
			f.ident.WeightVersion = id.WeightVersion
		}
		f.version(id.WeightVersion)
		return nil
	}
	ref := f.reps[f.from]
	hint := ""
	if part == "weight version" {
		hint = "; to collect across weight updates, allow them (allow_weight_change=True, --allow-weight-change): " +
			"each sample then records the weight version that produced it"
	}
	r.refused = &refusal{status.Errorf(status.InvalidArgument,
		"fleet: replica %d of %d (%s) %s %s, but replica %d (%s) serves %s: the %s differs, and every replica must serve "+
			"the same model for the whole run (its samples would mix two policies in one data set)%s",
		i+1, len(f.reps), r.Name, how, id, f.from+1, ref.Name, f.ident, part, hint)}
	f.warn(r.refused.Error())
	return r.refused
}

// cmp is x, or y when x is not known.
func cmp(x, y string) string {
	if x == "" {
		return y
	}
	return x
}

// version records a weight version the fleet has served.
func (f *Fleet) version(v string) {
	if v != "" && !slices.Contains(f.versions, v) {
		f.versions = append(f.versions, v)
	}
}

// unknown warns, once per replica, that replica i does not say which model it serves.
func (f *Fleet) unknown(i int) {
	r := f.reps[i]
	if r.warned {
		return
	}
	r.warned = true
	f.warn(fmt.Sprintf("fleet: replica %d of %d (%s) does not say which model it serves (no model path or name in its "+
		"model info): it cannot be compared with the others; make sure it serves the same model", i+1, len(f.reps), r.Name))
}

func (f *Fleet) warn(msg string) {
	if !slices.Contains(f.warnings, msg) {
		f.warnings = append(f.warnings, msg)
	}
}

// recheck runs replica i's Check again when it comes back after being down (a restarted
// server may serve another model): a Check that fails is the replica's answer (it goes
// down again); another identity is a refusal.
func (f *Fleet) recheck(ctx context.Context, i int) error {
	f.mu.Lock()
	r := f.reps[i]
	if r.refused != nil {
		f.mu.Unlock()
		return r.refused
	}
	need := r.recheck && r.Check != nil
	r.recheck = false
	f.mu.Unlock()
	if !need {
		return nil
	}
	c, err := r.Check(ctx)
	if err != nil {
		f.mu.Lock()
		r.recheck = true
		f.mu.Unlock()
		return err
	}
	if err := f.compare(i, c.identity(), "came back serving"); err != nil {
		return err
	}
	f.SetCapacity(i, c.Capacity)
	return nil
}

// answered checks the weight version an answer names against the replica's; an answer
// that names none is given the replica's (every record says which version produced it).
func (f *Fleet) answered(i int, res *generate.Result) error {
	f.mu.Lock()
	known := f.reps[i].ident.WeightVersion
	f.mu.Unlock()
	if res.WeightVersion == "" || res.WeightVersion == known {
		res.WeightVersion = cmp(res.WeightVersion, known)
		return nil
	}
	if err := f.compare(i, Identity{WeightVersion: res.WeightVersion}, "answered with"); err != nil {
		return err
	}
	return nil
}

// isRefusal reports whether err is a replica's refusal.
func isRefusal(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}
