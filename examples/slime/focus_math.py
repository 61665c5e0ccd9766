"""FOCUS hooks for a Slime math run: Slime imports this module by dotted path.

Put this directory on PYTHONPATH and pass the flags in ``launch.sh``. For each prompt,
Slime's rollout calls ``generate``: FOCUS collects one searched tree through Slime's own
SGLang router (exact tokens, no re-tokenising), returns the tree's actor segments as Slime
samples whose reward is the segment's advantage, and writes the critic targets as JSONL
files to ``$FOCUS_CRITIC_DIR`` (default ``focus-critic-targets``) for your value model.

Evaluation: ``evaluate`` (named by ``eval.yaml``'s datasets) runs one unbranched rollout
per eval sample, rewarded by its outcome (1 for a correct answer). ``generate`` answers
Slime's evaluation calls the same way, so an eval dataset without its own
``custom_generate_function_path`` (``--eval-prompt-data``) is evaluated correctly too.

Sampling: the agent sets no ``sampling=`` of its own, so Slime's ``--rollout-*`` flags and
each eval dataset's temperature / top_p / top_k / max_response_len decide (``max_new_tokens``
bounds every root-to-leaf path of a tree).

Loss scale: with ``FOCUS_TOKENS_PER_TREE`` set, ``reducer`` is
``normalized_policy_tokens(FOCUS_TOKENS_PER_TREE)`` (name it with
``--custom-pg-loss-reducer-function-path focus_math.reducer``): set it to the
``rollout/focus/trained_tokens_per_tree`` that ``log_rollout`` reports and a GRPO recipe's
learning rate and gradient clipping carry over (docs/slime.md).

Prompts and labels come from Slime's ``--input-key`` / ``--label-key``; the label is the
reference answer graded against the model's last ``\\boxed{...}``.
"""

from __future__ import annotations

import os

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.integrations import JsonlDirectory
from focus_go.integrations.slime import make_evaluate, make_generate, normalized_policy_tokens

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
BUDGET = int(os.environ.get("FOCUS_BUDGET", "32"))
WARMUP = int(os.environ.get("FOCUS_WARMUP", str(BUDGET // 2)))
SEGMENT = int(os.environ.get("FOCUS_SEGMENT_TOKENS", "256"))


def collector_for(policy, problem):
    """One problem's collector under the router policy Slime's current weights serve."""
    agent = Agent(
        policy=policy,
        env=MathEnv(problem.label, policy.decode),  # a fresh environment per problem
        system_prompt=SYSTEM_PROMPT,
        context=Segments(SEGMENT),
    )
    return Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=BUDGET, warmup=WARMUP))


# --custom-generate-function-path focus_math.generate
# FOCUS_RECORD_LAYOUT=paths: one sample per root-to-leaf path (per-token advantages; the same
# gradient with launch.sh's hooks from fewer tokens) instead of one per segment.
generate = make_generate(
    collector_for,
    profile="token_chunk",
    critic_sink=JsonlDirectory(os.environ.get("FOCUS_CRITIC_DIR", "focus-critic-targets")),
    allow_partial=True,  # a failed branch costs that branch, not the prompt
    layout=os.environ.get("FOCUS_RECORD_LAYOUT", "spans"),
)

# An eval dataset's custom_generate_function_path (eval.yaml): focus_math.evaluate
evaluate = make_evaluate(collector_for, profile="token_chunk")

# --custom-pg-loss-reducer-function-path focus_math.reducer (when FOCUS_TOKENS_PER_TREE is set)
if os.environ.get("FOCUS_TOKENS_PER_TREE"):
    reducer = normalized_policy_tokens(int(os.environ["FOCUS_TOKENS_PER_TREE"]))
