#!/usr/bin/env bash
# The FOCUS part of a Slime launch (THUDM/slime): add these arguments to your usual
# `python train.py ...` / `train_async.py` command (model, data, Megatron and SGLang
# arguments as for any Slime GRPO run). Needs `pip install focus-go` in Slime's environment.
#
#   PROMPT_DATA=/data/math/train.jsonl HF_CHECKPOINT=/models/Qwen3-4B \
#   EVAL_PROMPT_DATA=/data/math/aime.jsonl bash launch.sh <your other args>
#
# Optional: EVAL_PROMPT_DATA (+ EVAL_NAME, EVAL_INTERVAL) turns on evaluation through
# eval.yaml; FOCUS_TOKENS_PER_TREE switches the loss reducer to normalized_policy_tokens
# (Slime's loss scale; see docs/slime.md).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"      # makes focus_math importable
export FOCUS_CRITIC_DIR="${FOCUS_CRITIC_DIR:-$PWD/focus-critic-targets}"

FOCUS_ARGS=(
  # One FOCUS tree per prompt, collected through Slime's SGLang router.
  --custom-generate-function-path focus_math.generate
  # Keep FOCUS's per-segment advantages: no group centering, no GRPO/PPO estimator,
  # each generated token counted once in the loss.
  --custom-reward-post-process-path focus.integrations.slime.preserve_advantages
  --custom-advantage-function-path focus.integrations.slime.advantages
  --custom-pg-loss-reducer-function-path focus.integrations.slime.sum_policy_tokens
  # pass@k over each tree's rollouts and its trained tokens (rollout metrics), and eval
  # pass@k without --log-passrate (which cannot see trees when n-samples-per-prompt > 1).
  --custom-rollout-log-function-path focus.integrations.slime.log_rollout
  --custom-eval-rollout-log-function-path focus.integrations.slime.log_eval_rollout
  # Your data's prompt and reference-answer keys. FOCUS renders the chat itself from the
  # raw prompt, so do not pass --apply-chat-template; top-p must stay 1.0.
  --input-key "${INPUT_KEY:-prompt}"
  --label-key "${LABEL_KEY:-label}"
  --rollout-top-p 1.0
  # One tree per prompt (the tree's branches play the role of GRPO's group);
  # n > 1 collects n independent trees per prompt.
  --n-samples-per-prompt 1
)
if [[ -n "${FOCUS_TOKENS_PER_TREE:-}" ]]; then
  # The token sum divided by FOCUS_TOKENS_PER_TREE: Slime's default loss scale (the last
  # --custom-pg-loss-reducer-function-path wins).
  FOCUS_ARGS+=(--custom-pg-loss-reducer-function-path focus_math.reducer)
fi
if [[ -n "${EVAL_PROMPT_DATA:-}" ]]; then
  # eval.yaml names focus_math.evaluate for its dataset; --eval-prompt-data NAME PATH would
  # work too (Slime then calls focus_math.generate with evaluation=True, answered alike).
  FOCUS_ARGS+=(--eval-config "$HERE/eval.yaml" --eval-interval "${EVAL_INTERVAL:-20}")
fi

exec python "${SLIME_DIR:-.}/train.py" \
  --hf-checkpoint "${HF_CHECKPOINT:?set HF_CHECKPOINT}" \
  --prompt-data "${PROMPT_DATA:?set PROMPT_DATA}" \
  "${FOCUS_ARGS[@]}" "$@"
