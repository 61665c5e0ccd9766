"""The package version, read from the one source: the VERSION file at the project root."""

from __future__ import annotations

from pathlib import Path


def _read() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("focus-go")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    source = Path(__file__).resolve().parents[2] / "VERSION"
    return source.read_text().strip() if source.is_file() else "0+unknown"


__version__ = _read()
