"""The ``focus-go`` command (also ``python -m focus_go``): ``demo`` shows FOCUS end to end on
the embedded simulated server, ``collect`` collects trees for a JSONL file of problems from
your SGLang or vLLM server and writes training records, ``view`` renders a saved tree to
a self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__, _cli_view, _lib, _rules
from .cli import main as collect_command


def _version(_: argparse.Namespace) -> int:
    print(f"focus-go {__version__}")
    print(f"library  {_lib.library_version()} (C ABI {_lib.abi_version()}) at {_lib.library_path()}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    return run_demo(Path(args.out), n_problems=args.problems, budget=args.budget, warmup=args.warmup)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="focus-go",
        description=__doc__.replace("``", "'"),
        epilog="examples:\n  focus-go demo\n  focus-go collect problems.jsonl --out runs/a --sglang http://localhost:30000 "
        "--model Qwen/Qwen3-4B\n  focus-go view runs/a",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="print the package and library versions").set_defaults(run=_version)
    demo = commands.add_parser("demo", help="collect trees on the embedded simulated server and write records")
    demo.add_argument("--out", default="focus-demo", help="output directory (default: ./focus-demo)")
    demo.add_argument("--problems", type=int, default=4, help="how many bundled problems to collect")
    selective = _rules.defaults()["selective"]  # Selective()'s defaults, the library's
    demo.add_argument("--budget", type=int, default=selective["budget"], help="rollouts per tree")
    demo.add_argument("--warmup", type=int, default=selective["warmup"], help="warmup rollouts per tree")
    demo.set_defaults(run=_demo)
    collect_command.add_parser(commands)
    _cli_view.add_parser(commands)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
