"""The ``focus-go`` command (also ``python -m focus_go``): ``demo`` shows FOCUS end to end on
the embedded simulated server, ``collect`` collects trees for a JSONL file of problems from
your SGLang or vLLM server and writes training records, ``view`` renders a saved tree to
a self-contained HTML page."""

from __future__ import annotations

import argparse
from typing import Any, List, Optional

from .. import __version__, _lib
from . import collect, demo, view


def _version(_: argparse.Namespace) -> int:
    print(f"focus-go {__version__}")
    print(f"library  {_lib.library_version()} (C ABI {_lib.abi_version()}) at {_lib.library_path()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``focus-go`` parser: one subcommand per module of ``focus_go.cli``."""
    parser = argparse.ArgumentParser(
        prog="focus-go",
        description=__doc__.replace("``", "'"),
        epilog="examples:\n  focus-go demo\n  focus-go collect problems.jsonl --out runs/a --sglang http://localhost:30000 "
        "--model Qwen/Qwen3-4B\n  focus-go view runs/a",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands: Any = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="print the package and library versions").set_defaults(run=_version)
    demo.add_parser(commands)
    collect.add_parser(commands)
    view.add_parser(commands)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the ``focus-go`` command with ``argv`` (default: the process's arguments);
    returns the exit code."""
    args = build_parser().parse_args(argv)
    return args.run(args)
