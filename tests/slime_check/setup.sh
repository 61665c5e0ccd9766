#!/usr/bin/env bash
# The environment `make slime-check` runs THUDM/slime's code in: a virtualenv of its own
# (build/slime-venv, about 7 GB: torch from PyPI is the CUDA build, which also runs on the
# CPU) and Megatron-LM's `megatron` package at the commit Slime's Dockerfile pins
# (build/slime-check/megatron). Everything comes from PyPI except the two source
# checkouts, which the user provides (docs/development.md, "Checking against Slime's own code"):
#
#   SLIME_DIR     a checkout of github.com/THUDM/slime (required)
#   MEGATRON_DIR  a folder whose megatron/ is Megatron-LM at Slime's pinned commit, used as is; or
#   MEGATRON_GIT  a Megatron-LM git dir (a clone's .git, or a bare clone) holding that commit,
#                 from which setup.sh extracts megatron/ (git archive: the repository is not changed)
#
# Re-running is cheap: the venv is kept once its stamp matches this script's package list.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${SLIME_VENV:-$ROOT/build/slime-venv}"
WORK="${SLIME_CHECK_WORK:-$ROOT/build/slime-check}"
PYTHON="${PYTHON:-python3}"

: "${SLIME_DIR:?set SLIME_DIR to a checkout of THUDM/slime}"
[ -f "$SLIME_DIR/slime/rollout/sglang_rollout.py" ] || { echo "setup.sh: $SLIME_DIR is not a THUDM/slime checkout" >&2; exit 2; }

# Slime's pins: its Dockerfile's Megatron commit and SGLang image version.
MEGATRON_COMMIT="$(sed -n 's/^ARG MEGATRON_COMMIT=//p' "$SLIME_DIR/docker/Dockerfile" | head -1)"
SGLANG_VERSION="$(sed -n 's/^ARG SGLANG_IMAGE_TAG=v\([0-9][^-]*\).*/\1/p' "$SLIME_DIR/docker/Dockerfile" | head -1)"
: "${MEGATRON_COMMIT:?no ARG MEGATRON_COMMIT in $SLIME_DIR/docker/Dockerfile}"
: "${SGLANG_VERSION:?no ARG SGLANG_IMAGE_TAG in $SLIME_DIR/docker/Dockerfile}"

# What Slime imports on the paths the harness drives. sglang itself is installed without
# its dependencies (they would pull a GPU runtime): Slime's argument parser needs only
# sglang.srt.server_args.ServerArgs and sglang.srt.constants, whose imports are the small
# pure-Python packages listed here. transformers is pinned to the version that sglang
# release requires (a newer one refuses sglang's config registrations).
PACKAGES=(
  torch torchvision ray sglang-router pyyaml omegaconf httpx numpy tqdm pytest requests
  "transformers==5.12.1" psutil pybase64 pillow ipython pyzmq dill openai partial_json_parser
  msgspec sentencepiece wandb six pylatexenc
)
STAMP="$VENV/.slime-check-$(printf '%s\n' "${PACKAGES[@]}" "sglang==$SGLANG_VERSION" | sha256sum | cut -c1-16)"

if [ ! -f "$STAMP" ]; then
  echo "== virtualenv $VENV (torch, ray, sglang-router, sglang $SGLANG_VERSION --no-deps, ...; a few GB from PyPI)"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "sglang==$SGLANG_VERSION"
  "$VENV/bin/python" -c "from sglang.srt.server_args import ServerArgs; import sglang.srt.constants, sglang_router, ray, torch"
  rm -f "$VENV"/.slime-check-*
  touch "$STAMP"
fi

if [ -n "${MEGATRON_DIR:-}" ]; then
  [ -f "$MEGATRON_DIR/megatron/training/arguments.py" ] || { echo "setup.sh: MEGATRON_DIR=$MEGATRON_DIR has no megatron/training" >&2; exit 2; }
  echo "== Megatron-LM from $MEGATRON_DIR (used as is; Slime pins $MEGATRON_COMMIT)"
else
  DEST="$WORK/megatron"
  if [ "$(cat "$DEST/COMMIT" 2>/dev/null)" != "$MEGATRON_COMMIT" ]; then
    : "${MEGATRON_GIT:?set MEGATRON_GIT to a Megatron-LM git dir holding $MEGATRON_COMMIT, or MEGATRON_DIR to a checkout}"
    echo "== Megatron-LM $MEGATRON_COMMIT from $MEGATRON_GIT into $DEST"
    rm -rf "$DEST" && mkdir -p "$DEST"
    git --git-dir="$MEGATRON_GIT" archive "$MEGATRON_COMMIT" megatron | tar -x -C "$DEST"
    echo "$MEGATRON_COMMIT" > "$DEST/COMMIT"
  fi
fi
echo "== ready: $VENV, Slime at $SLIME_DIR"
