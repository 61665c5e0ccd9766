"""One mode of ``make slime-check``: THUDM/slime's real rollout and training code driving
focus's Slime hooks, in a process of its own.

    python tests/slime_check/modes.py MODE RESULT.json

(``run.py`` starts one such process per mode; see it and docs/development.md, "Checking against
Slime's own code".) Each mode builds Slime's arguments with Slime's own ``parse_args`` from
``examples/slime/launch.sh``'s FOCUS flags plus the few model and data flags a
``--debug-rollout-only`` run needs, starts Slime's sglang-router (``_start_router``) on
loopback with focus's simulated SGLang server as its one worker, and then calls Slime's
functions as its RolloutManager and train actor would: ``generate_rollout`` (or
``generate_rollout_fully_async``, or ``eval_rollout``) through ``_get_rollout_data``,
``log_rollout_data``, ``_convert_samples_to_train_data``, ``_split_train_data_by_dp``,
``process_rollout_data``, ``compute_advantages_and_returns``, the train-side
``log_rollout_data`` (pass rates) and ``loss_function`` with backward. Only the model's
forward is a stand-in (random logits). The result (PASS/FAIL, the error with the Slime
file and line it came from, and what was measured) is written as JSON.

Nothing here is imported by the package or collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("SLIME_CHECK_WORK", ROOT / "build" / "slime-check"))
SLIME_DIR = Path(os.environ.get("SLIME_DIR", "")).resolve() if os.environ.get("SLIME_DIR") else None
LAUNCH = ROOT / "examples" / "slime" / "launch.sh"
CKPT = WORK / "hf-qwen3"
DATA = WORK / "data.jsonl"

# Small trees so that a mode takes seconds: focus_math reads these.
os.environ.setdefault("FOCUS_BUDGET", "8")
os.environ.setdefault("FOCUS_WARMUP", "4")
os.environ.setdefault("FOCUS_SEGMENT_TOKENS", "64")
os.environ.setdefault("FOCUS_CRITIC_DIR", str(WORK / "critic-targets"))
# Slime's router binds the host's address unless told otherwise: keep it on loopback.
os.environ["SLIME_HOST_IP"] = "127.0.0.1"
os.environ.setdefault("WANDB_MODE", "disabled")

# The simulated server's timing: slow enough that a tree is still running when Slime aborts.
SIM_LATENCY = {"first_token": 0.004, "per_token": 0.0008}


class ModeFailure(Exception):
    """A check of a mode failed (as opposed to Slime or focus raising)."""


class Result:
    """What one mode measured and which of its checks failed."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.numbers: Dict[str, Any] = {}
        self.failures: List[str] = []
        self.error: Optional[str] = None
        self.where: Optional[str] = None
        self.notes: List[str] = []

    def expect(self, ok: bool, message: str) -> bool:
        if not ok:
            self.failures.append(message)
        return ok

    def to_json(self) -> Dict[str, Any]:
        status = "PASS" if not self.failures and self.error is None else "FAIL"
        return {
            "mode": self.mode,
            "status": status,
            "error": self.error,
            "where": self.where,
            "failures": self.failures,
            "numbers": self.numbers,
            "notes": self.notes,
        }


# ---------------------------------------------------------------- arguments


def launch_focus_args() -> List[str]:
    """examples/slime/launch.sh's FOCUS_ARGS array, expanded by bash exactly as the
    script expands it (defaults of ${VAR:-...} included)."""
    script = (
        'HERE="$(cd "$(dirname "$0")" && pwd)"\n'
        "eval \"$(sed -n '/^FOCUS_ARGS=(/,/^)/p' \"$0\")\"\n"
        'printf "%s\\0" "${FOCUS_ARGS[@]}"\n'
    )
    out = subprocess.run(["bash", "-c", script, str(LAUNCH)], check=True, capture_output=True).stdout
    args = [a.decode() for a in out.split(b"\0") if a]
    if not args:
        raise ModeFailure(f"{LAUNCH}: found no FOCUS_ARGS array")
    return args


def set_flag(argv: List[str], flag: str, *values: str) -> List[str]:
    """argv with ``flag`` set to ``values`` (replacing an earlier occurrence; no values:
    a store_true flag)."""
    out: List[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == flag:
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                i += 1
            continue
        out.append(argv[i])
        i += 1
    return out + [flag, *values]


def base_argv(*, focus: bool = True, batch: int = 2, n: int = 1) -> List[str]:
    """launch.sh's FOCUS flags (or none, for Slime's own default path) plus the model and
    data flags of a --debug-rollout-only run on the simulated server."""
    argv = launch_focus_args() if focus else []
    argv = set_flag(argv, "--n-samples-per-prompt", str(n))
    for flag, *values in (
        ("--hf-checkpoint", str(CKPT)),
        ("--prompt-data", str(DATA)),
        ("--debug-rollout-only",),
        ("--rollout-num-gpus", "1"),
        ("--rollout-batch-size", str(batch)),
        ("--global-batch-size", str(batch * n)),
        ("--num-rollout", "2"),
        ("--rollout-max-response-len", "1024"),
        ("--micro-batch-size", "1"),
        ("--seq-length", "4096"),
    ):
        argv = set_flag(argv, flag, *values)
    return argv


def parse(argv: List[str]) -> Any:
    from slime.utils.arguments import parse_args

    saved = sys.argv
    sys.argv = ["train.py", *argv]
    try:
        return parse_args()
    finally:
        sys.argv = saved


# ---------------------------------------------------------------- servers


class Cluster:
    """Slime's router on loopback with focus's simulated SGLang server as its worker."""

    def __init__(self, args: Any, latency: Optional[Dict[str, Any]] = None) -> None:
        import requests

        from slime.ray.rollout import _start_router

        # The router is a forked process: start it before focus's Go library is loaded.
        ip, port = _start_router(args)
        args.sglang_router_ip, args.sglang_router_port = ip, port
        self.router = f"http://{ip}:{port}"

        from focus_go.sim import SimServer

        self.sim = SimServer(seed=0, tokenizer_dir=str(CKPT), latency=latency or SIM_LATENCY)
        response = requests.post(f"{self.router}/workers", json={"url": self.sim.url, "worker_type": "regular"})
        response.raise_for_status()
        deadline = time.time() + 30
        while time.time() < deadline:
            workers = requests.get(f"{self.router}/workers").json().get("workers") or []
            if any(w.get("url") == self.sim.url and w.get("is_healthy", True) for w in workers):
                break
            time.sleep(0.2)
        else:
            raise ModeFailure(f"the router at {self.router} did not list the simulated worker {self.sim.url}")

        from slime.utils.http_utils import init_http_client

        init_http_client(args)

    def generate_requests(self) -> int:
        return int(self.sim.stats()["requests"].get("/generate", 0))


# ---------------------------------------------------------------- Slime's manager and trainer


def rollout_manager(args: Any) -> Any:
    """Slime's RolloutManager without its Ray actor and server start: the real class's
    methods on an object holding what its __init__ would set for these modes."""
    import slime.ray.rollout as ray_rollout
    from slime.utils.misc import load_function

    cls = ray_rollout.RolloutManager.__ray_metadata__.modified_class
    manager = object.__new__(cls)
    manager.args = args
    manager.servers = {}
    manager.data_source = load_function(args.data_source_path)(args)
    manager.generate_rollout = load_function(args.rollout_function_path)
    manager.eval_generate_rollout = load_function(args.eval_function_path)
    manager.custom_reward_post_process_func = (
        load_function(args.custom_reward_post_process_path) if args.custom_reward_post_process_path else None
    )
    manager.custom_convert_samples_to_train_data_func = None
    manager._health_monitors = []
    manager.rollout_id = -1
    manager.train_parallel_config = {"dp_size": 1, "cp_size": 1, "vpp_size": 1, "microbatch_group_size_per_vp_stage": 1}
    return manager


def register_cpu_accelerator() -> None:
    """Slime's accelerator registry knows CUDA and MUSA; the train-side code here runs on
    the CPU, so register a CPU backend (Slime's documented extension point) and select it."""
    import torch

    from slime.utils import accelerator
    from slime.utils.accelerator.base import Accelerator

    class CPUAccelerator(Accelerator):
        name = "cpu"
        device_type = "cpu"
        communication_backend_name = "gloo"

        def is_available(self) -> bool:
            return True

        def device(self, index: Any = None) -> Any:
            return torch.device("cpu")

        def device_name(self, index: Any = None) -> str:
            return "cpu"

        def set_device(self, index: Any) -> None:
            pass

        def current_device(self) -> str:
            return "cpu"

        def device_count(self) -> int:
            return 1

        def synchronize(self, device: Any = None) -> None:
            pass

        def current_stream(self, device: Any = None) -> Any:
            return None

        def empty_cache(self) -> None:
            pass

        def mem_get_info(self, device: Any = None) -> Any:
            return (0, 0)

        def memory_allocated(self, device: Any = None) -> int:
            return 0

        def memory_reserved(self, device: Any = None) -> int:
            return 0

    accelerator.register_accelerator("cpu", CPUAccelerator, is_available=lambda: True, priority=-100,
                                     communication_backends=("gloo",))
    os.environ["SLIME_ACCELERATOR"] = "cpu"


_DIST_READY = False


def init_parallel_state() -> None:
    """One-rank torch.distributed (gloo) and Megatron's parallel state, as the train actor
    has them with TP = PP = CP = DP = 1."""
    global _DIST_READY
    if _DIST_READY:
        return
    import socket

    import torch.distributed as dist
    from megatron.core import mpu

    register_cpu_accelerator()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{port}")
    mpu.initialize_model_parallel(1, 1)
    _DIST_READY = True


_RAY_READY = False


def init_ray() -> None:
    global _RAY_READY
    if not _RAY_READY:
        import ray

        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
        _RAY_READY = True


def collect(manager: Any, rollout_id: int, res: Result) -> List[Any]:
    """RolloutManager.generate up to the point --debug-rollout-only returns: the rollout
    function through _get_rollout_data (its rollout-id contract check and flattening),
    then log_rollout_data."""
    from slime.observability.rollout_metrics import log_rollout_data

    started = time.time()
    data, metrics = manager._get_rollout_data(rollout_id=rollout_id)
    res.numbers[f"rollout{rollout_id}_seconds"] = round(time.time() - started, 2)
    if metrics is None:
        metrics = {}
    log_rollout_data(rollout_id, manager.args, data, metrics, time.time() - started)
    # What a custom rollout log hook added (focus's log_rollout: pass@k over trees), and
    # each tree's counts once (its samples share the source's rollout_id).
    res.numbers[f"rollout{rollout_id}_metrics"] = {
        k: v for k, v in metrics.items() if k.startswith(("passrate/", "rollout/focus/", "rollout/dynamic_filter/"))
    }
    trees = {}
    for sample in data:
        focus = (sample.metadata or {}).get("focus") or {}
        if "finished_rollouts" in focus:
            trees[sample.rollout_id] = (focus["finished_rollouts"], focus["successes"])
    res.numbers[f"rollout{rollout_id}_tree_counts"] = list(trees.values())
    return data


def rollout_data_of(manager: Any, samples: List[Any]) -> Dict[str, Any]:
    """The train actor's rollout data for samples: the rollout manager's
    _convert_samples_to_train_data and _split_train_data_by_dp, then process_rollout_data,
    with the dtypes the Megatron backend's data loader gives its tensors."""
    import torch

    from slime.utils.data import process_rollout_data

    refs = manager._split_train_data_by_dp(manager._convert_samples_to_train_data(samples))
    rollout_data = process_rollout_data(manager.args, refs, 0, 1)
    rollout_data["tokens"] = [t.to(dtype=torch.long) for t in rollout_data["tokens"]]
    rollout_data["loss_masks"] = [t.to(dtype=torch.int) for t in rollout_data["loss_masks"]]
    if "rollout_mask_sums" in rollout_data:
        rollout_data["rollout_mask_sums"] = rollout_data["rollout_mask_sums"].to(dtype=torch.float32)
    return rollout_data


def train(manager: Any, data: List[Any], res: Result, *, rollout_id: int = 0) -> Dict[str, Any]:
    """The rest of RolloutManager.generate (_convert_samples_to_train_data,
    _split_train_data_by_dp) and of the train actor: process_rollout_data,
    compute_advantages_and_returns, the train-side log_rollout_data (pass rates with
    --log-passrate), and loss_function with backward over every micro-batch, on random
    logits where the model's forward would run."""
    import torch

    from slime.backends.megatron_utils.data import get_batch, get_data_iterator
    from slime.backends.megatron_utils.loss import compute_advantages_and_returns, loss_function
    from slime.observability import train_metric_utils

    init_parallel_state()
    init_ray()
    args = manager.args
    rollout_data = rollout_data_of(manager, data)

    compute_advantages_and_returns(args, rollout_data)
    rewards = [float(r) for r in rollout_data["rewards"]]
    partition = rollout_data.get("partition") or list(range(len(rewards)))
    for i, (adv, reward, n) in enumerate(zip(rollout_data["advantages"], rewards, rollout_data["response_lengths"])):
        if not res.expect(adv.numel() == n, f"sample {i}: {adv.numel()} advantages for {n} response tokens"):
            break
        # A path sample (layout "paths") trains each token on its own advantage.
        per_token = (getattr(data[partition[i]], "train_metadata", None) or {}).get("focus_advantages")
        if per_token is not None:
            if not res.expect(adv.tolist() == torch.tensor(per_token, dtype=torch.float32).tolist(),
                              f"sample {i}: advantages are not its per-token advantages"):
                break
            continue
        if not res.expect(bool(torch.allclose(adv, torch.full_like(adv, reward))), f"sample {i}: advantages are not its reward {reward}"):
            break
    train_metric_utils.log_rollout_data(rollout_id, args, rollout_data)

    vocab = int(max(int(t.max()) for t in rollout_data["tokens"])) + 1
    generator = torch.Generator().manual_seed(1234)
    keys = [
        "tokens", "multimodal_train_inputs", "packed_seq_params", "total_lengths", "response_lengths",
        "loss_masks", "log_probs", "ref_log_probs", "values", "advantages", "returns", "rollout_log_probs",
        "teacher_log_probs", "rollout_mask_sums",
    ]

    def run_losses(reducer_path: Optional[str]) -> Dict[str, float]:
        saved = args.custom_pg_loss_reducer_function_path
        args.custom_pg_loss_reducer_function_path = reducer_path
        try:
            iterator = get_data_iterator(rollout_data)[0]
            total, grad_sq, microbatches = 0.0, 0.0, 0
            gen = torch.Generator().manual_seed(1234)
            for step, (mbs, gbs) in enumerate(zip(rollout_data["num_microbatches"], rollout_data["global_batch_sizes"])):
                for _ in range(mbs):
                    batch = get_batch(iterator, keys, args.data_pad_size_multiplier, args.allgather_cp)
                    logits = torch.randn(1, batch["tokens"].shape[1], vocab, generator=gen).requires_grad_(True)
                    loss, _normalizer, _log = loss_function(args, batch, mbs, gbs, logits)
                    loss.backward()
                    total += float(loss.detach())
                    grad_sq += float((logits.grad.double() ** 2).sum())
                    microbatches += 1
            return {"loss": total, "grad_norm": math.sqrt(grad_sq), "microbatches": microbatches}
        finally:
            args.custom_pg_loss_reducer_function_path = saved

    del generator
    hooked = run_losses(args.custom_pg_loss_reducer_function_path)
    res.numbers["train_samples"] = len(rewards)
    res.numbers["loss"] = round(hooked["loss"], 6)
    res.numbers["grad_norm"] = round(hooked["grad_norm"], 6)
    res.numbers["microbatches"] = hooked["microbatches"]
    res.expect(math.isfinite(hooked["loss"]) and math.isfinite(hooked["grad_norm"]), "loss or gradient is not finite")
    res.expect(hooked["grad_norm"] > 0 or all(r == 0 for r in rewards), "backward gave a zero gradient")
    if args.custom_pg_loss_reducer_function_path:
        default = run_losses(None)
        res.numbers["loss_slime_default_reducer"] = round(default["loss"], 6)
        if default["loss"]:
            res.numbers["loss_ratio_to_default_reducer"] = round(hooked["loss"] / default["loss"], 2)
    return rollout_data


# ---------------------------------------------------------------- checks on samples


def slime_prompt_ids(args: Any) -> List[List[int]]:
    """Each data row's prompt ids as Slime's own default path makes them: its Dataset with
    --apply-chat-template over the row's messages (focus's system prompt + the prompt),
    then the tokenizer's encode as sglang_rollout.generate does."""
    from slime.utils.data import Dataset
    from slime.utils.processing_utils import load_tokenizer

    tokenizer = load_tokenizer(args.hf_checkpoint, trust_remote_code=True)
    dataset = Dataset(
        str(DATA), tokenizer=tokenizer, processor=None, max_length=None, prompt_key="messages",
        label_key="label", apply_chat_template=True, metadata_key="metadata",
    )
    return [tokenizer.encode(sample.prompt, add_special_tokens=False) for sample in dataset.samples]


def read_rows() -> List[Dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def check_samples(args: Any, cluster: Cluster, samples: List[Any], res: Result, *, focus: bool, sources: int,
                  prefix: str = "", prompt_ids: bool = True) -> None:
    """Shape, status, rollout-id, prompt-token and log-prob checks of a flat list of
    training samples against what Slime's default path produces (``prefix`` names the
    rollout in the numbers and messages of any but the first)."""
    import requests

    from slime.utils.types import Sample

    res = _Prefixed(res, prefix)

    res.numbers["samples"] = len(samples)
    statuses: Dict[str, int] = {}
    for s in samples:
        statuses[s.status.value] = statuses.get(s.status.value, 0) + 1
    res.numbers["statuses"] = statuses
    res.expect(bool(samples), "no samples")
    res.expect(all(isinstance(s, Sample) for s in samples), "a flattened element is not a Slime Sample")
    res.expect(
        all(s.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED) for s in samples),
        f"samples to train have statuses {statuses} (only COMPLETED/TRUNCATED may reach training)",
    )
    bad = [i for i, s in enumerate(samples) if not (
        len(s.loss_mask or []) == s.response_length
        and len(s.rollout_log_probs or []) == s.response_length
        and 0 < s.response_length <= len(s.tokens)
    )]
    res.expect(not bad, f"{len(bad)} samples whose tokens/loss_mask/rollout_log_probs/response_length disagree (first: {bad[:3]})")
    rids = {}
    for s in samples:
        rids.setdefault(s.rollout_id if s.rollout_id is not None else s.index, set()).add(s.index)
    res.numbers["rollouts"] = len(rids)
    res.expect(len(rids) == sources, f"{len(rids)} distinct rollout ids, expected one per source sample ({sources})")
    if focus:
        res.expect(all(s.rollout_id == s.index for s in samples), "a focus segment's rollout_id is not its source sample's index")

    # Prompt tokens: every sample's context starts with the prompt ids Slime's default
    # path renders for its row (the data source walks the rows in order: no shuffle);
    # not for an agent with a prompt of its own (tools in the template).
    expected = slime_prompt_ids(args) if prompt_ids else []
    mismatched = 0
    for s in samples if prompt_ids else ():
        ids = expected[s.group_index % len(expected)]
        if list(s.tokens[: len(ids)]) != ids:
            mismatched += 1
    res.numbers["prompt_token_mismatches"] = mismatched
    res.expect(mismatched == 0, f"{mismatched} samples whose tokens do not start with Slime's rendered prompt ids")

    # Log probs: the sampler's log probabilities of the trained tokens, checked against the
    # server's own scoring of the same context (temperature 1, top-p 1: the two agree),
    # on the first samples that train a token (a resumed tree's masked segments do not).
    worst, checked = 0.0, 0
    for s in [s for s in samples if any(s.loss_mask)][:6]:
        body = {"input_ids": list(s.tokens), "sampling_params": {"max_new_tokens": 1, "temperature": 0},
                "return_logprob": True, "logprob_start_len": 0}
        meta = requests.post(f"{cluster.sim.url}/generate", json=body).json()["meta_info"]
        scored = [lp for lp, _tok, *_ in meta["input_token_logprobs"]]
        start = len(s.tokens) - s.response_length
        for j, (lp, m) in enumerate(zip(s.rollout_log_probs, s.loss_mask)):
            if m:
                ref = scored[start + j]
                worst = max(worst, abs(float(lp) - float(ref)))
                checked += 1
    res.numbers["logprob_tokens_checked"] = checked
    res.numbers["logprob_max_abs_diff"] = round(worst, 9)
    res.expect(checked > 0 and worst < 1e-4, f"rollout_log_probs differ from the server's scoring by up to {worst}")


class _Prefixed:
    """A Result view whose numbers and failures carry a prefix."""

    def __init__(self, res: Result, prefix: str) -> None:
        self.res, self.prefix = res, prefix
        self.numbers = _PrefixedDict(res.numbers, prefix)

    def expect(self, ok: bool, message: str) -> bool:
        return self.res.expect(ok, f"{self.prefix}{message}" if self.prefix else message)


class _PrefixedDict:
    def __init__(self, d: Dict[str, Any], prefix: str) -> None:
        self.d, self.prefix = d, prefix.replace(": ", "_")

    def __setitem__(self, key: str, value: Any) -> None:
        self.d[f"{self.prefix}{key}"] = value


def flat(node: Any) -> List[Any]:
    """The samples in a (nested) list of samples."""
    if isinstance(node, list):
        return [s for item in node for s in flat(item)]
    return [node]


def slime_frames(tb: Any) -> Optional[str]:
    """The traceback's frames in Slime's and focus's sources, innermost last, as
    "slime FILE:LINE (function)" (the last three)."""
    frames = []
    for frame in traceback.extract_tb(tb):
        path = Path(frame.filename)
        if SLIME_DIR and SLIME_DIR in path.parents:
            frames.append(f"slime {path.relative_to(SLIME_DIR)}:{frame.lineno} ({frame.name})")
        elif ROOT / "python" in path.parents:
            frames.append(f"focus {path.relative_to(ROOT)}:{frame.lineno} ({frame.name})")
    return " <- ".join(reversed(frames[-3:])) or None


# ---------------------------------------------------------------- modes


def mode_slime_default(res: Result) -> None:
    """Slime's own default path (no focus hook): the baseline the focus modes are checked
    against, run through the same checks."""
    argv = base_argv(focus=False)
    argv = set_flag(argv, "--input-key", "messages")
    argv = set_flag(argv, "--label-key", "label")
    argv = set_flag(argv, "--apply-chat-template")
    argv = set_flag(argv, "--rm-type", "math")
    args = parse(argv)
    cluster = Cluster(args)
    manager = rollout_manager(args)
    data = collect(manager, 0, res)
    check_samples(args, cluster, data, res, focus=False, sources=args.rollout_batch_size * args.n_samples_per_prompt)
    train(manager, data, res)


def _focus_rollout(res: Result, argv: List[str], *, rollouts: int = 1, check_buffer: bool = False,
                   prompt_ids: bool = True) -> List[Any]:
    args = parse(argv)
    cluster = Cluster(args)
    manager = rollout_manager(args)
    watch_abort(cluster, res)
    for rollout_id in range(rollouts):
        before = cluster.generate_requests()
        data = collect(manager, rollout_id, res)
        res.numbers[f"rollout{rollout_id}_generate_requests"] = cluster.generate_requests() - before
        check_samples(args, cluster, data, res, focus=True, sources=args.rollout_batch_size * args.n_samples_per_prompt,
                      prefix="" if rollout_id == 0 else f"rollout{rollout_id}: ", prompt_ids=prompt_ids)
        last = data
        if rollout_id == 0:
            train(manager, data, res)
        if check_buffer:
            buffer = manager.data_source.buffer
            res.numbers[f"buffer_groups_after_rollout{rollout_id}"] = len(buffer)
            shapes_ok = all(
                isinstance(g, list) and len(g) == args.n_samples_per_prompt and all(hasattr(s, "status") for s in g)
                for g in buffer
            )
            res.expect(shapes_ok, "a group put back into the data buffer is not a list of n_samples_per_prompt Samples")
    res.numbers["sim_peak_running"] = cluster.sim.stats()["peak_running"]
    return last


def watch_abort(cluster: Cluster, res: Result) -> None:
    """Wrap sglang_rollout.abort (which generate_rollout calls once a rollout has its
    batch) to measure the /generate requests the server receives after the abort began
    and how long the abort waited for the pending trees."""
    from slime.rollout import sglang_rollout

    real = sglang_rollout.abort

    async def abort(args: Any, rollout_id: int) -> Any:
        at = cluster.generate_requests()
        started = time.time()
        out = await real(args, rollout_id)
        res.numbers[f"abort{rollout_id}_seconds"] = round(time.time() - started, 3)
        res.numbers[f"abort{rollout_id}_requests_after"] = cluster.generate_requests() - at
        res.numbers[f"abort{rollout_id}_partial_groups"] = len(out)
        return out

    sglang_rollout.abort = abort


def mode_default(res: Result) -> None:
    """launch.sh's flags as they are: n_samples_per_prompt 1, no over-sampling."""
    _focus_rollout(res, base_argv())


def mode_default_paths(res: Result) -> None:
    """launch.sh's flags with examples/slime's FOCUS_RECORD_LAYOUT=paths: the generate hook
    returns one sample per root-to-leaf path through Slime's real rollout and router, and
    the train side gives each token its own advantage."""
    os.environ["FOCUS_RECORD_LAYOUT"] = "paths"
    _focus_rollout(res, base_argv())


def mode_n2_log_passrate(res: Result) -> None:
    """n_samples_per_prompt 2 (two trees per prompt) with --log-passrate: Slime's
    train-side pass rate cannot see trees, so the hook must refuse it at its first call,
    naming the log hook to use, before any request reaches the server."""
    args = parse(set_flag(base_argv(n=2), "--log-passrate"))
    expect_refused(res, args, "log_rollout", "the rollout ran with --log-passrate and 2 trees per prompt")


def expect_refused(res: Result, args: Any, names: str, ran: str) -> None:
    """Slime's rollout with ``args`` must stop at the hook's first call with a ValueError
    naming ``names`` (what to use instead), before any request reaches the server; ``ran``
    says what went wrong if it did not stop."""
    cluster = Cluster(args)
    manager = rollout_manager(args)
    try:
        manager._get_rollout_data(rollout_id=0)
    except ValueError as exc:
        res.numbers["refused_with"] = type(exc).__name__
        res.expect(names in str(exc), f"the refusal does not name {names}: {exc}")
    else:
        res.expect(False, ran)
    res.numbers["generate_requests"] = cluster.generate_requests()
    res.expect(cluster.generate_requests() == 0, "requests were sent before the refusal")


def mode_n2_pass_rates(res: Result) -> None:
    """n_samples_per_prompt 2 with focus's rollout log hook instead of --log-passrate: the
    rollout and the train side run, and Slime's rollout metrics carry pass@k over the
    trees' finished rollouts (checked against the samples' tree counts)."""
    argv = set_flag(base_argv(n=2), "--custom-rollout-log-function-path", "focus.integrations.slime.log_rollout")
    _focus_rollout(res, argv)
    metrics = res.numbers.get("rollout0_metrics") or {}
    res.expect("passrate/pass@1" in metrics, f"no passrate/pass@1 in Slime's rollout metrics: {sorted(metrics)}")
    res.expect("passrate/pass@2" in metrics, "no passrate/pass@2 in Slime's rollout metrics")
    trees = res.numbers.get("rollout0_tree_counts") or []
    if trees and "passrate/pass@1" in metrics:
        expected = sum(s / f for f, s in trees if f) / sum(1 for f, _ in trees if f)
        res.expect(abs(metrics["passrate/pass@1"] - expected) < 1e-9,
                   f"pass@1 {metrics['passrate/pass@1']} is not the trees' mean success rate {expected}")


def mode_over_sampling(res: Result) -> None:
    """--over-sampling-batch-size above --rollout-batch-size: Slime aborts the extra trees."""
    _focus_rollout(res, set_flag(base_argv(batch=2), "--over-sampling-batch-size", "4"), rollouts=2)


def mode_partial_rollout(res: Result) -> None:
    """--partial-rollout with over-sampling: the trees pending at the abort go back into
    the data buffer, and the next rollout takes them up."""
    argv = set_flag(base_argv(batch=2), "--over-sampling-batch-size", "4")
    argv = set_flag(argv, "--partial-rollout")
    _focus_rollout(res, argv, rollouts=2, check_buffer=True)


def mode_fully_async(res: Result) -> None:
    """--rollout-function-path slime.rollout.fully_async_rollout.generate_rollout_fully_async."""
    from slime.rollout import fully_async_rollout

    argv = set_flag(base_argv(batch=2), "--rollout-function-path", "slime.rollout.fully_async_rollout.generate_rollout_fully_async")
    argv = set_flag(argv, "--sglang-server-concurrency", "4")
    try:
        _focus_rollout(res, argv)
    finally:
        fully_async_rollout._stop_global_worker()


def mode_concurrency(res: Result) -> None:
    """--sglang-server-concurrency 200 with many prompts at once: the most requests the
    server saw in flight must exceed focus's old fixed cap of 64 and stay within 200."""
    argv = set_flag(base_argv(batch=24), "--sglang-server-concurrency", "200")
    args = parse(argv)
    cluster = Cluster(args, latency={"first_token": 0.05, "per_token": 0.002})
    manager = rollout_manager(args)
    collect(manager, 0, res)
    peak = cluster.sim.stats()["peak_running"]
    res.numbers["sglang_server_concurrency"] = args.sglang_server_concurrency
    res.numbers["sim_peak_running"] = peak
    res.expect(peak <= args.sglang_server_concurrency, f"{peak} requests in flight, above --sglang-server-concurrency {args.sglang_server_concurrency}")
    res.expect(peak > 64, f"at most {peak} requests in flight with 24 trees of 4 warm-up rollouts each and --sglang-server-concurrency 200 (capped at 64?)")


def mode_abort_mid_tree(res: Result) -> None:
    """Slime's abort() while trees are mid-search: requests the server receives after the
    abort began and after the server had aborted, and how long until every hook has
    returned. 24 trees of 16 rollouts
    want 96 warm-up requests at once, more than --sglang-server-concurrency 48 lets run:
    at the abort some requests are running (the server aborts those) and the rest are
    still waiting inside the trees, which must not send them."""
    import asyncio

    from slime.rollout import sglang_rollout
    from slime.utils.async_utils import run

    os.environ["FOCUS_BUDGET"], os.environ["FOCUS_WARMUP"] = "16", "4"
    trees, abort_after = 24, 40
    argv = set_flag(base_argv(batch=2), "--over-sampling-batch-size", str(trees))
    argv = set_flag(argv, "--sglang-server-concurrency", "48")
    args = parse(argv)
    cluster = Cluster(args, latency={"first_token": 0.05, "per_token": 0.004})
    manager = rollout_manager(args)

    from slime.backends.sglang_utils import server_control

    real_abort_once = server_control._abort_server_once
    marks: Dict[str, Any] = {}

    async def abort_once(url: str) -> None:
        await real_abort_once(url)
        marks.setdefault("after_abort_request", cluster.generate_requests())
        marks.setdefault("abort_request_at", time.time())

    server_control._abort_server_once = abort_once

    async def scenario() -> Dict[str, Any]:
        state = sglang_rollout.GenerateState(args)
        for _ in range(trees // 8):  # the data source wraps around its rows once per call
            state.submit_generate_tasks(manager.data_source.get_samples(8))
        deadline = time.time() + 60
        while cluster.generate_requests() < abort_after and time.time() < deadline:
            await asyncio.sleep(0.01)
        at_abort = cluster.generate_requests()
        pending = list(state.pendings)
        started = time.time()
        aborted = await sglang_rollout.abort(args, rollout_id=0)
        took = time.time() - started
        statuses: Dict[str, int] = {}
        for task in pending:
            for sample in flat(task.result()):
                key = getattr(getattr(sample, "status", None), "value", type(sample).__name__)
                statuses[key] = statuses.get(key, 0) + 1
        state.reset()
        return {"at_abort": at_abort, "took": took, "groups": aborted, "statuses": statuses,
                "pending": len(pending)}

    out = run(scenario())
    after = cluster.generate_requests() - out["at_abort"]
    res.numbers["generate_requests_before_abort"] = out["at_abort"]
    res.numbers["generate_requests_after_abort"] = after
    res.numbers["abort_to_return_seconds"] = round(out["took"], 3)
    if "after_abort_request" in marks:
        res.numbers["generate_requests_after_servers_aborted"] = cluster.generate_requests() - marks["after_abort_request"]
    res.numbers["aborted_groups_returned"] = len(out["groups"])
    res.numbers["trees_pending_at_abort"] = out["pending"]
    res.numbers["returned_statuses"] = out["statuses"]
    res.numbers["sim_sequences_aborted"] = cluster.sim.stats()["aborted"]
    res.numbers["abort_requests"] = int(cluster.sim.stats()["requests"].get("/abort_request", 0))
    res.expect(out["pending"] > 0, "no tree was still running when Slime aborted (the check measured nothing)")
    # The hook sees Slime's flag within its 5 ms poll: a segment that ended in that window
    # may send its next request before the server's abort, which aborts it; once the server
    # has aborted, nothing more may arrive.
    late = res.numbers.get("generate_requests_after_servers_aborted")
    res.expect(late == 0, f"the server received {late} /generate requests after it had aborted everything")
    res.expect(after <= out["pending"], f"the server received {after} /generate requests after Slime's abort began, "
               f"more than one per pending tree ({out['pending']})")
    res.expect(out["took"] < 0.25, f"abort() returned {out['took']:.2f} s after it began (the hooks kept running)")


def _eval_config(with_hook: bool, extra: Optional[Dict[str, Any]] = None) -> Path:
    name = ("eval-with-hook" if with_hook else "eval-without-hook") + ("-sampling" if extra else "")
    path = WORK / f"{name}.yaml"
    settings = {"n_samples_per_eval_prompt": 1, **(extra or {})}
    lines = ["eval:", "  datasets:", "    - name: sim", f"      path: {DATA}", "      input_key: prompt",
             "      label_key: label"] + [f"      {k}: {v}" for k, v in settings.items()]
    if with_hook:
        lines.append("      custom_generate_function_path: focus_math.evaluate")
    path.write_text("\n".join(lines) + "\n")
    return path


def mode_eval_sampling_params(res: Result) -> None:
    """An eval dataset's own sampling settings reach the hook as Slime's per-call
    sampling_params: max_response_len 40 and temperature 0 (greedy). Slime's eval_rollout
    runs twice; every response must stay within 40 tokens and the two greedy runs must
    give the same tokens, or the hook must refuse the settings with a focus ConfigError."""
    from slime.rollout.base_types import call_rollout_fn

    from focus_go.errors import ConfigError

    config = _eval_config(True, {"max_response_len": 40, "temperature": 0.0})
    args = parse(set_flag(base_argv(), "--eval-config", str(config)))
    cluster = Cluster(args)  # held to the end: its simulated server closes when the Cluster is collected
    manager = rollout_manager(args)
    runs = []
    try:
        for _ in range(2):
            result = call_rollout_fn(manager.eval_generate_rollout, args, 0, manager.data_source, evaluation=True)
            runs.append(result.data["sim"]["samples"])
    except ConfigError as exc:
        res.notes.append(f"refused: {type(exc).__name__}: {exc}")
        return
    longest = max(s.response_length for s in runs[0] + runs[1])
    res.numbers["eval_samples"] = len(runs[0])
    res.numbers["longest_response"] = longest
    res.expect(longest <= 40, f"a response has {longest} tokens; the eval dataset's max_response_len is 40")
    differ = sum(1 for a, b in zip(runs[0], runs[1]) if list(a.tokens) != list(b.tokens))
    res.numbers["greedy_samples_that_differ"] = differ
    res.numbers["generate_requests"] = cluster.generate_requests()
    res.expect(differ == 0, f"{differ} of {len(runs[0])} eval samples differ between two temperature-0 runs (temperature 0 not applied)")


def _eval(res: Result, with_hook: bool) -> None:
    from slime.rollout.base_types import call_rollout_fn

    argv = set_flag(base_argv(), "--eval-config", str(_eval_config(with_hook)))
    argv = set_flag(argv, "--eval-max-response-len", "1024")
    args = parse(argv)
    cluster = Cluster(args)
    manager = rollout_manager(args)
    before = cluster.generate_requests()
    result = call_rollout_fn(manager.eval_generate_rollout, args, 0, manager.data_source, evaluation=True)
    data = result.data["sim"]
    rows = len(read_rows())
    rewards = [float(r) for r in data["rewards"]]
    res.numbers["eval_prompts"] = rows
    res.numbers["eval_samples"] = len(data["samples"])
    res.numbers["eval_score"] = round(sum(rewards) / max(1, len(rewards)), 4)
    res.numbers["generate_requests"] = cluster.generate_requests() - before
    res.expect(len(data["samples"]) == rows, f"{len(data['samples'])} eval samples for {rows} prompts x 1 sample each")
    res.expect(all(r in (0.0, 1.0) for r in rewards), f"eval rewards are not outcomes in {{0, 1}}: {sorted(set(rewards))[:6]}")


def mode_eval_with_hook(res: Result) -> None:
    """eval_rollout with the eval dataset's custom_generate_function_path = focus_math.evaluate."""
    _eval(res, True)


def mode_eval_without_hook(res: Result) -> None:
    """eval_rollout with no per-dataset hook: Slime calls the training hook with
    evaluation=True (if its signature takes it); the score must be an outcome, as with
    the eval hook, or the hook must refuse with a clear message."""
    try:
        _eval(res, False)
    except Exception as exc:  # a refusal with a clear message passes
        from focus_go.errors import ConfigError

        if isinstance(exc, ConfigError):
            res.notes.append(f"refused: {type(exc).__name__}: {exc}")
            return
        raise


# ---------------------------------------------------------------- the path record layout


def _prefix_model(vocab: int, dim: int = 16, table: int = 1 << 16) -> Any:
    """A random-logits model that is a function of each position's whole prefix: position
    t's logits are feature(hash(tokens[:t+1])) @ W, W the one parameter, so the same
    context gives the same logits in any record, however the records cut the tree."""
    import torch

    gen = torch.Generator().manual_seed(20)
    features = torch.randn(table, dim, generator=gen, dtype=torch.float64)
    weight = (0.5 * torch.randn(dim, vocab, generator=gen, dtype=torch.float64)).requires_grad_(True)

    def logits(tokens: Any) -> Any:
        idx, h = [], 1469598103934665603
        for tok in tokens.reshape(-1).tolist():
            h = (h * 1099511628211 + int(tok) + 1) % (1 << 61)
            idx.append(h % table)
        # Slime takes float32 logits; W and the features stay float64.
        return (features[torch.tensor(idx)] @ weight).float().unsqueeze(0)

    return weight, logits


def _slime_train_side(args: Any, samples: List[Any], res: Result, name: str) -> Dict[str, Any]:
    """Slime's train side for one layout's samples: the rollout manager's
    _convert_samples_to_train_data (focus's preserve_advantages) and
    _split_train_data_by_dp, process_rollout_data, compute_advantages_and_returns (focus's
    advantages hook) and the train-side log_rollout_data. Returns the rollout data."""
    from slime.backends.megatron_utils.loss import compute_advantages_and_returns
    from slime.observability import train_metric_utils

    rd = rollout_data_of(rollout_manager(args), samples)
    compute_advantages_and_returns(args, rd)
    res.expect(all(isinstance(r, float) for r in rd["rewards"]), f"{name}: rollout_data rewards are not floats after the advantages hook")
    train_metric_utils.log_rollout_data(0, args, rd)
    return rd


def _token_terms(rd: Dict[str, Any]) -> Dict[Any, int]:
    """(full prefix ids, token id, behaviour log-prob, advantage) of every trained token in
    Slime's rollout data, with multiplicity."""
    out: Dict[Any, int] = {}
    for tokens, n, mask, lps, advs in zip(rd["tokens"], rd["response_lengths"], rd["loss_masks"], rd["rollout_log_probs"],
                                          rd["advantages"]):
        ids = tokens.tolist()
        start = len(ids) - int(n)
        for j, (m, lp, a) in enumerate(zip(mask.tolist(), lps.tolist(), advs.tolist())):
            if m:
                key = (tuple(ids[: start + j]), ids[start + j], lp, a)
                out[key] = out.get(key, 0) + 1
    return out


def _slime_loss(args: Any, rd: Dict[str, Any], logits_of: Any, weight: Any, reducer: Optional[str]) -> Dict[str, Any]:
    """Slime's loss_function over every micro-batch of rd with the prefix model, each
    micro-batch's loss divided by the step's micro-batch count as Megatron's schedule does
    before backward: the objective and d objective / dW the optimiser would see."""
    from slime.backends.megatron_utils.data import get_batch, get_data_iterator
    from slime.backends.megatron_utils.loss import loss_function

    keys = ["tokens", "multimodal_train_inputs", "packed_seq_params", "total_lengths", "response_lengths", "loss_masks",
            "log_probs", "ref_log_probs", "values", "advantages", "returns", "rollout_log_probs", "teacher_log_probs",
            "rollout_mask_sums"]
    saved = args.custom_pg_loss_reducer_function_path
    args.custom_pg_loss_reducer_function_path = reducer
    weight.grad = None
    total, microbatches = 0.0, 0
    try:
        iterator = get_data_iterator(rd)[0]
        for mbs, gbs in zip(rd["num_microbatches"], rd["global_batch_sizes"]):
            for _ in range(mbs):
                batch = get_batch(iterator, keys, args.data_pad_size_multiplier, args.allgather_cp)
                loss, _normalizer, _log = loss_function(args, batch, mbs, gbs, logits_of(batch["tokens"]))
                (loss / mbs).backward()
                total += float(loss.detach()) / mbs
                microbatches += 1
    finally:
        args.custom_pg_loss_reducer_function_path = saved
    return {"loss": total, "grad": weight.grad.detach().clone(), "microbatches": microbatches}


def mode_paths_gradient(res: Result) -> None:
    """The path record layout (make_generate(..., layout="paths")) against the per-span
    layout on the same trees, through Slime's own train-side code: the generate hook
    collects each tree once from the simulated SGLang server (the router is not needed:
    the hook posts to it directly) and returns path samples; the per-span records of the
    same tree (exported from the same collection) become samples through to_sample. Both
    go through the rollout manager's conversion with preserve_advantages, the advantages
    hook and Slime's loss_function (PPO with --use-rollout-logprobs, so the ratio reads the
    behaviour log-probs) on a random-logits model that is a function of each position's
    prefix. With sum_policy_tokens the trained token terms must be identical and the
    objective and its gradient equal to 1e-6 (relative). Slime's default reducer is
    measured too: this Slime divides each rollout's masked token sum by the rollout's
    trained tokens (rollout_mask_sums), which both layouts share, so it agrees as well."""
    import asyncio

    import torch

    import focus_go.integrations as integrations
    from focus_go.integrations.slime import make_generate, to_sample
    from focus_go.sim import SimServer
    from slime.utils.types import Sample

    import focus_math

    trees = 3
    argv = set_flag(base_argv(batch=trees), "--use-rollout-logprobs")
    args = parse(argv)
    init_parallel_state()
    init_ray()
    sim = SimServer(seed=0, tokenizer_dir=str(CKPT))
    args.sglang_router_ip, args.sglang_router_port = "127.0.0.1", int(sim.url.rsplit(":", 1)[1])

    # The same collection's per-span records, kept beside the path records the hook uses.
    real_tree_records = integrations.tree_records
    spans_of: Dict[int, Any] = {}

    def both_layouts(state: Any, *, group_index: int, layout: str = "spans", **kw: Any) -> Any:
        spans_of[group_index] = real_tree_records(state, group_index=group_index, layout="spans", **kw)
        return real_tree_records(state, group_index=group_index, layout=layout, **kw)

    integrations.tree_records = both_layouts
    hook = make_generate(focus_math.collector_for, profile="token_chunk", allow_partial=True, layout="paths")
    sources = [Sample(index=i, group_index=i, rollout_id=i, prompt=p.prompt, label=p.label, metadata={})
               for i, p in enumerate(sim.problems()[:trees])]
    try:
        trees_out = [asyncio.run(hook(args, s, None)) for s in sources]
    finally:
        integrations.tree_records = real_tree_records
        hook.close()
    samples = {
        "paths": [x for t in trees_out for x in flat(list(t))],
        "spans": [to_sample(r, src, None, Sample) for src in sources for r in spans_of[src.group_index].actor],
    }
    res.expect(all(s.train_metadata and "focus_advantages" in s.train_metadata for s in samples["paths"]),
               "a path sample has no per-token advantages in train_metadata")

    data = {name: _slime_train_side(args, ss, res, name) for name, ss in samples.items()}
    for name, rd in data.items():
        res.numbers[f"{name}_samples"] = len(rd["tokens"])
        res.numbers[f"{name}_tokens_sent"] = int(sum(int(t.numel()) for t in rd["tokens"]))
        res.numbers[f"{name}_tokens_trained"] = int(sum(int(m.sum()) for m in rd["loss_masks"]))
    res.numbers["tokens_ratio_spans_to_paths"] = round(res.numbers["spans_tokens_sent"] / max(1, res.numbers["paths_tokens_sent"]), 3)
    res.expect(res.numbers["paths_tokens_trained"] == res.numbers["spans_tokens_trained"], "the layouts train different numbers of tokens")
    terms = {name: _token_terms(rd) for name, rd in data.items()}
    res.numbers["trained_terms_equal"] = terms["paths"] == terms["spans"]
    res.expect(terms["paths"] == terms["spans"], "the trained token terms (prefix, token, log-prob, advantage) differ between layouts")

    # One vocabulary for both layouts: the token ids that occur, renumbered densely.
    ids = sorted({int(t) for rd in data.values() for seq in rd["tokens"] for t in seq.tolist()})
    index = torch.full((max(ids) + 1,), -1, dtype=torch.long)
    index[torch.tensor(ids)] = torch.arange(len(ids))
    for rd in data.values():
        rd["tokens"] = [index[t] for t in rd["tokens"]]
    weight, logits_of = _prefix_model(len(ids))
    for reducer, tag in ((args.custom_pg_loss_reducer_function_path, "sum"), (None, "slime_default")):
        out = {name: _slime_loss(args, rd, logits_of, weight, reducer) for name, rd in data.items()}
        a, b = out["paths"], out["spans"]
        dloss = abs(a["loss"] - b["loss"])
        dgrad = float((a["grad"] - b["grad"]).abs().max())
        scale = float(b["grad"].abs().max())
        res.numbers[f"{tag}_loss_paths"] = a["loss"]
        res.numbers[f"{tag}_loss_spans"] = b["loss"]
        res.numbers[f"{tag}_loss_abs_diff"] = dloss
        res.numbers[f"{tag}_grad_max_abs_diff"] = dgrad
        res.numbers[f"{tag}_grad_max_abs"] = float(b["grad"].abs().max())
        res.numbers[f"{tag}_microbatches"] = {"paths": a["microbatches"], "spans": b["microbatches"]}
        if tag == "sum":
            res.expect(reducer == "focus.integrations.slime.sum_policy_tokens", f"launch.sh's reducer is {reducer}")
            res.expect(b["grad"].abs().max() > 0, "the gradient is zero (the check measured nothing)")
            res.expect(dloss <= 1e-6 * max(1.0, abs(b["loss"])), f"sum reducer: the objectives differ by {dloss}")
            res.expect(dgrad <= 1e-6 * scale, f"sum reducer: the gradients differ by up to {dgrad}")
    sim.close()


MODES: Dict[str, Callable[[Result], None]] = {
    "slime-default": mode_slime_default,
    "default": mode_default,
    "default-paths": mode_default_paths,
    "n2-log-passrate": mode_n2_log_passrate,
    "n2-pass-rates": mode_n2_pass_rates,
    "over-sampling": mode_over_sampling,
    "partial-rollout": mode_partial_rollout,
    "fully-async": mode_fully_async,
    "abort-mid-tree": mode_abort_mid_tree,
    "concurrency": mode_concurrency,
    "eval-with-hook": mode_eval_with_hook,
    "eval-without-hook": mode_eval_without_hook,
    "eval-sampling-params": mode_eval_sampling_params,
    "paths-gradient": mode_paths_gradient,
}
# The modes of the flags a Slime user sets (flag_modes.py), checked after the rollout modes.
if __name__ == "__main__":
    sys.modules.setdefault("modes", sys.modules["__main__"])  # flag_modes imports this module, not a copy
from flag_modes import FLAG_MODES  # noqa: E402 - it imports this module's harness

MODES.update(FLAG_MODES)


def main() -> int:
    mode, out = sys.argv[1], Path(sys.argv[2])
    res = Result(mode)
    started = time.time()
    try:
        MODES[mode](res)
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, not raised
        res.error = f"{type(exc).__name__}: {exc}"
        res.where = slime_frames(exc.__traceback__)
        traceback.print_exc()
    res.numbers["seconds"] = round(time.time() - started, 1)
    out.write_text(json.dumps(res.to_json(), indent=2, default=str))
    sys.stdout.flush()
    os._exit(0)  # the router process, Ray and the async loop thread go with the process


if __name__ == "__main__":
    sys.exit(main())
