"""Slime hooks: FOCUS trees as Slime training samples.

Slime (THUDM/slime) loads every hook from a dotted path (``importlib.import_module`` of
everything before the last dot, then ``getattr``), so these names are given to Slime as::

    --custom-generate-function-path  mymodule.generate      # generate = make_generate(...)
    --custom-reward-post-process-path focus.integrations.slime.preserve_advantages
    --custom-advantage-function-path  focus.integrations.slime.advantages
    --custom-pg-loss-reducer-function-path focus.integrations.slime.sum_policy_tokens
    --custom-rollout-log-function-path focus.integrations.slime.log_rollout
    --custom-eval-rollout-log-function-path focus.integrations.slime.log_eval_rollout
    --dynamic-sampling-filter-path focus.integrations.slime.tree_has_signal   # optional

The generate hook is called once per Slime sample (``n_samples_per_prompt`` concurrent
calls per prompt). It collects one searched tree from the SGLang router Slime started
(``http://{args.sglang_router_ip}:{args.sglang_router_port}/generate``, through the
Go-native ``SGLangPolicy``) and returns the tree's actor segments as a list of Slime
samples sharing the source sample's ``rollout_id``, each with ``reward`` = its FOCUS
advantage (a ``TreeSamples``, which also answers for the source sample where Slime's
partial and fully-async rollouts read group elements). ``preserve_advantages`` keeps
Slime's group normalisation from changing those rewards, ``advantages`` broadcasts them
over each sample's response tokens, and ``sum_policy_tokens`` sums the masked token
losses so every generated token counts its segment's advantage once
(``normalized_policy_tokens(C)`` divides that sum by C tokens per rollout, for Slime's
loss scale). An evaluation call (Slime passes ``evaluation=True``) gets one unbranched
rollout rewarded by its outcome, as from ``make_evaluate``'s hook. Slime's per-call
``sampling_params`` are mapped onto the tree (``_call_settings``) or refused where they
cannot apply to one. ``log_rollout`` and ``log_eval_rollout`` give pass@k that sees the
trees, which ``--log-passrate`` cannot.

Nothing here imports torch or Slime: tensors are made lazily inside the hooks that
receive them, and Slime's ``Sample`` class is taken from the sample Slime passes in.

The package holds one job per module; every name above is importable from the package:

- ``hooks``: ``make_generate`` and ``make_evaluate``, the hooks they build;
- ``settings``: Slime's flags and per-call sampling_params mapped onto a tree, or refused;
  ``router_concurrency``;
- ``samples``: ``to_sample`` and ``TreeSamples``, Slime samples from FOCUS records;
- ``abort``: watching Slime's abort flag and stopping the running trees;
- ``loss``: ``preserve_advantages``, ``advantages``, ``sum_policy_tokens``,
  ``normalized_policy_tokens``;
- ``metrics``: ``pass_rates``, ``log_rollout``, ``log_eval_rollout``;
- ``filters``: ``tree_has_signal``, the dynamic sampling filter for trees.
"""

from __future__ import annotations

from .hooks import GenerateHook, make_evaluate, make_generate
from .filters import tree_has_signal
from .loss import advantages, normalized_policy_tokens, preserve_advantages, sum_policy_tokens
from .metrics import log_eval_rollout, log_rollout, pass_rates
from .samples import TOKEN_ADVANTAGES_KEY as TOKEN_ADVANTAGES_KEY, TreeSamples, to_sample
from .settings import router_concurrency

# Names the single-module version also held: the types of the hooks' signatures, and the
# function a pickled TreeSamples names.
from .. import CollectorFor as CollectorFor, CriticSink as CriticSink, Problem as Problem, Workspace as Workspace
from ...collector import Collector as Collector
from ...generation.types import SamplingParams as SamplingParams
from .samples import _rebuild_tree_samples as _rebuild_tree_samples

__all__ = [
    "GenerateHook",
    "TreeSamples",
    "advantages",
    "log_eval_rollout",
    "log_rollout",
    "make_evaluate",
    "make_generate",
    "normalized_policy_tokens",
    "pass_rates",
    "preserve_advantages",
    "router_concurrency",
    "sum_policy_tokens",
    "to_sample",
    "tree_has_signal",
]
