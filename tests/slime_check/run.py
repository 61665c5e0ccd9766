"""``make slime-check``: every Slime rollout mode, driven through THUDM/slime's real code
with focus's hooks, one process per mode (modes.py), plus Slime's own plugin-contract
tests with focus's hook paths. Prints a table, writes build/slime-check.json, and exits 1
if any check fails.

    SLIME_DIR=/path/to/slime build/slime-venv/bin/python tests/slime_check/run.py [MODE ...]

Environment: SLIME_DIR (a THUDM/slime checkout, required), MEGATRON_DIR (the folder
holding Megatron-LM's ``megatron`` package; setup.sh makes build/slime-check/megatron),
SLIME_COMMIT or SLIME_GIT (the commit to record when SLIME_DIR is not a git work tree),
SLIME_CHECK_TIMEOUT (seconds per mode, default 420), SLIME_CHECK_JSON (the summary's path).
The clone's own package (python/) and build/libfocus.so are used, whatever is installed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORK = Path(os.environ.get("SLIME_CHECK_WORK", ROOT / "build" / "slime-check"))
QWEN3 = ROOT / "build" / "testdata" / "qwen3"
ROWS = 8

# The plugin-contract files of Slime's tests/plugin_contracts and the focus hook paths
# each takes (the files whose hooks focus does not provide run with Slime's defaults).
CONTRACTS = [
    # The generate contract calls the hook with a bare Args (no router, no hf_checkpoint)
    # and a label-less sample: tests/slime_contract/generate_hooks.py gives make_generate's
    # hook the simulated server as its router and a label-free environment.
    ("test_plugin_generate_contracts.py", ["--custom-generate-function-path", "slime_contract.generate_hooks.generate"]),
    ("test_plugin_runtime_hook_contracts.py",
     ["--custom-reward-post-process-path", "focus.integrations.slime.preserve_advantages"]),
    ("test_plugin_rollout_contracts.py", []),
    ("test_plugin_path_loading_contracts.py", []),
]
# Contract tests whose assertion cannot hold for a hook that returns a tree: each with why.
NOT_APPLICABLE = {
    "test_custom_generate_function_path_supports_user_override":
        "asserts that one Sample comes back; a tree is a TreeSamples list of samples (Slime's fan-out shape, "
        "which its own test_generate_and_rm_group_rm_accepts_list_result accepts), and Slime's list branch then "
        "reads args.custom_rm_path, which the contract's bare Args lacks",
}


def env() -> Dict[str, str]:
    slime = os.environ.get("SLIME_DIR")
    if not slime or not (Path(slime) / "slime" / "rollout" / "sglang_rollout.py").is_file():
        sys.exit(f"slime-check: SLIME_DIR={slime!r} is not a THUDM/slime checkout (see docs/development.md, 'Checking against Slime's own code')")
    megatron = os.environ.get("MEGATRON_DIR", str(WORK / "megatron"))
    if not (Path(megatron) / "megatron" / "training" / "arguments.py").is_file():
        sys.exit(f"slime-check: MEGATRON_DIR={megatron!r} holds no megatron/training package (run tests/slime_check/setup.sh)")
    library = ROOT / "build" / "libfocus.so"
    if not library.is_file():
        sys.exit(f"slime-check: {library} is missing: run `make lib`")
    e = dict(os.environ)
    e["SLIME_DIR"] = str(Path(slime).resolve())
    # A PYTHONPATH already set (extra packages for the venv) comes last.
    e["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "python"), str(ROOT / "examples" / "slime"), str(Path(slime).resolve()), str(Path(megatron).resolve()),
         str(ROOT / "tests")] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    )
    e["FOCUS_GO_LIBRARY"] = str(library)
    e["SLIME_CHECK_WORK"] = str(WORK)
    e["PYTHONUNBUFFERED"] = "1"
    return e


def slime_commit(slime: str) -> str:
    """SLIME_COMMIT if set, else HEAD of the checkout (or of the git dir SLIME_GIT)."""
    if os.environ.get("SLIME_COMMIT"):
        return os.environ["SLIME_COMMIT"]
    git = ["git", f"--git-dir={os.environ['SLIME_GIT']}"] if os.environ.get("SLIME_GIT") else ["git", "-C", slime]
    try:
        return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (set SLIME_COMMIT or SLIME_GIT)"


def prepare(e: Dict[str, str]) -> None:
    """The HF checkpoint directory (the real Qwen3 tokenizer from build/testdata plus a
    config.json, no weights) and the prompt data (the simulator's bundled problems)."""
    ckpt = WORK / "hf-qwen3"
    ckpt.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not (QWEN3 / name).is_file():
            sys.exit(f"slime-check: {QWEN3 / name} is missing: run `make testdata`")
        target = ckpt / name
        if not target.exists():
            target.symlink_to(QWEN3 / name)
    (ckpt / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 32768,
        "bos_token_id": 151643, "eos_token_id": 151645, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    }))
    script = (
        "import json, sys\n"
        "from focus_go.sim import SimServer\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from focus_math import SYSTEM_PROMPT\n"
        "with SimServer(seed=0) as s:\n"
        "    problems = s.problems()\n"
        f"with open(sys.argv[1], 'w') as f:\n"
        f"    for p in problems[:{ROWS}]:\n"
        "        f.write(json.dumps({'prompt': p.prompt, 'label': p.label, 'messages': [\n"
        "            {'role': 'system', 'content': SYSTEM_PROMPT}, {'role': 'user', 'content': p.prompt}],\n"
        "            'metadata': {'problem_id': p.id}}) + '\\n')\n"
    )
    subprocess.run([sys.executable, "-c", script, str(WORK / "data.jsonl"), str(ROOT / "examples" / "slime")], env=e, check=True)


def run_mode(mode: str, e: Dict[str, str], timeout: float) -> Dict[str, Any]:
    out = WORK / "results" / f"{mode}.json"
    log = WORK / "logs" / f"{mode}.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    started = time.time()
    with open(log, "w") as f:
        # Its own session: the router Slime forks (a daemon process, orphaned by the mode's
        # os._exit) and Ray's workers are killed with the whole group when the mode ends.
        proc = subprocess.Popen([sys.executable, str(HERE / "modes.py"), mode, str(out)], env=e, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"mode": mode, "status": "FAIL", "error": f"timed out after {timeout:.0f} s", "where": None,
                    "failures": [], "numbers": {"seconds": round(time.time() - started, 1)}, "notes": [], "log": str(log)}
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    if not out.is_file():
        return {"mode": mode, "status": "FAIL", "error": "the mode's process died without a result", "where": None,
                "failures": [], "numbers": {"seconds": round(time.time() - started, 1)}, "notes": [], "log": str(log)}
    result = json.loads(out.read_text())
    result["log"] = str(log)
    return result


def run_contracts(e: Dict[str, str], timeout: float) -> List[Dict[str, Any]]:
    """Slime's tests/plugin_contracts files, each run as Slime documents (python FILE
    --xxx-path HOOK), from SLIME_DIR (the runtime-hook contract reads Slime's sources by
    relative path)."""
    results = []
    slime = e["SLIME_DIR"]
    for name, hook_args in CONTRACTS:
        path = Path(slime) / "tests" / "plugin_contracts" / name
        started = time.time()
        proc = subprocess.run([sys.executable, str(path), *hook_args, "-q", "-p", "no:cacheprovider"], env=e, cwd=slime,
                              capture_output=True, text=True, timeout=timeout)
        text = proc.stdout + proc.stderr
        summary = next((ln.strip("= ") for ln in reversed(text.splitlines()) if re.search(r"\d+ (passed|failed|error)", ln)), "")
        failed = re.findall(r"^FAILED (\S+)(?: - (.*))?$", text, re.M)
        # pytest -q leaves the message out of the summary line: take each failure's
        # exception line ("E   Type: message") and its location ("path:line: Type").
        raised = re.findall(r"^E\s+(\S*(?:Error|Exception|Failed)\S*: .*)$", text, re.M)
        located = re.findall(r"^(\S+\.py:\d+): \w+$", text, re.M)
        failed = [(t, m or (raised[i] if i < len(raised) else "") + (f" at {located[i]}" if i < len(located) else ""))
                  for i, (t, m) in enumerate(failed)]
        (WORK / "logs" / f"contract-{name}.log").write_text(text)
        applicable = [(t, m) for t, m in failed if t.split("::")[-1] not in NOT_APPLICABLE]
        ok = proc.returncode == 0 or (failed and not applicable and "passed" in summary)
        notes = [" ".join(hook_args) or "Slime's default paths"]
        notes += [f"not applicable: {t.split('::')[-1]}: {NOT_APPLICABLE[t.split('::')[-1]]}" for t, _ in failed if (t, _) not in applicable]
        results.append({
            "mode": f"contract:{name.removeprefix('test_plugin_').removesuffix('_contracts.py')}",
            "status": "PASS" if ok else "FAIL",
            "error": None if ok else "; ".join(f"{t.split('::')[-1]}: {m[:300]}" for t, m in applicable or failed) or summary,
            "where": None, "failures": [], "notes": notes,
            "numbers": {"summary": summary, "seconds": round(time.time() - started, 1)},
        })
    return results


def table(results: List[Dict[str, Any]]) -> str:
    lines = []
    width = max(len(r["mode"]) for r in results)
    for r in results:
        nums = {k: v for k, v in r["numbers"].items() if k != "seconds"}
        lines.append(f"{r['mode']:<{width}}  {r['status']}  {r['numbers'].get('seconds', '?')} s")
        if r.get("error"):
            lines.append(f"{'':<{width}}    error: {r['error'][:400]}")
        if r.get("where"):
            lines.append(f"{'':<{width}}    at: {r['where']}")
        for failure in r.get("failures") or []:
            lines.append(f"{'':<{width}}    check failed: {failure[:300]}")
        for note in r.get("notes") or []:
            lines.append(f"{'':<{width}}    note: {note[:300]}")
        if nums:
            lines.append(f"{'':<{width}}    measured: " + ", ".join(f"{k}={v}" for k, v in nums.items()))
    return "\n".join(lines)


def main() -> int:
    sys.path.insert(0, str(HERE))
    e = env()
    sys.path.insert(0, e["PYTHONPATH"].split(os.pathsep)[2])
    import modes  # noqa: E402 - the mode list only; each mode runs in its own process

    wanted = sys.argv[1:] or list(modes.MODES) + ["contracts"]
    unknown = [m for m in wanted if m not in modes.MODES and m != "contracts"]
    if unknown:
        sys.exit(f"slime-check: unknown modes {unknown}; known: {list(modes.MODES)} and contracts")
    timeout = float(os.environ.get("SLIME_CHECK_TIMEOUT", "420"))
    WORK.mkdir(parents=True, exist_ok=True)
    prepare(e)
    commit = slime_commit(e["SLIME_DIR"])
    print(f"slime-check: Slime {commit} at {e['SLIME_DIR']}; focus {ROOT}", flush=True)
    results = []
    for mode in wanted:
        if mode == "contracts":
            results.extend(run_contracts(e, timeout))
        else:
            print(f"== {mode}", flush=True)
            results.append(run_mode(mode, e, timeout))
            print(table(results[-1:]), flush=True)
    failed = [r["mode"] for r in results if r["status"] != "PASS"]
    summary = {
        "slime_commit": commit,
        "slime_dir": e["SLIME_DIR"],
        "focus_commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "passed": len(results) - len(failed),
        "failed": len(failed),
        "results": results,
    }
    path = Path(os.environ.get("SLIME_CHECK_JSON", ROOT / "build" / "slime-check.json"))
    path.write_text(json.dumps(summary, indent=2, default=str))
    print("\n" + table(results))
    print(f"\nslime-check: {len(results) - len(failed)} passed, {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else ""))
    print(f"slime-check: summary in {path}; per-mode logs in {WORK / 'logs'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
