"""The ``focus-go`` command (also ``python -m focus_go``)."""

from __future__ import annotations

import argparse
import sys

from . import __version__, _lib


def _version(_: argparse.Namespace) -> int:
    print(f"focus-go {__version__}")
    print(f"library  {_lib.library_version()} (C ABI {_lib.abi_version()}) at {_lib.library_path()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="focus-go", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="print the package and library versions").set_defaults(run=_version)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
