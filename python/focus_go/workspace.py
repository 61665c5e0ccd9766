"""Workspace: where tools run, and how many run at once.

``Workspace(path=None, *, max_parallel=None)`` is an async context manager. While it is
open it has a root directory (a fresh temporary directory when ``path`` is None, removed
when the last user exits; a given ``path`` is created if missing and always kept) and an
``asyncio.Semaphore`` of ``max_parallel`` slots (None: no limit) that bounds concurrent
tool executions across everything that shares the workspace: pass the same Workspace to
several Collectors and their ToolEnvs together run at most ``max_parallel`` tools.

Each collection (one problem's tree) gets its own working directory under the root
(``problem_dir``); every branch of that tree shares it, so tools that write files should
write names that do not collide between branches. A tool receives that directory when it
takes a ``workspace`` keyword argument.

The workspace may be entered more than once (each Collector entering it, or nested
``async with``): it opens on the first entry and closes on the last exit. Use it from one
event loop at a time; the semaphore is created anew each time it opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import AsyncIterator, Optional, Union

from .errors import ConfigError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class Workspace:
    """A root working directory for tools plus a limit on concurrent tool executions,
    shareable between collectors.

    A workspace is an async context manager. While it is open it has a root directory
    and a limit of ``max_parallel`` concurrent tool executions across everything that
    shares it: pass the same workspace to several collectors and their ``ToolEnv``s
    together run at most ``max_parallel`` tools at once.

    Each collection (one problem's tree) gets its own working directory under the root,
    shared by every branch of that tree, so tools that write files should choose names
    that do not collide between branches. A tool receives that directory when it takes a
    ``workspace`` keyword argument.

    The workspace may be entered more than once (by each collector that holds it, or by
    nested ``async with``): it opens on the first entry and closes on the last exit. Use
    it from one event loop at a time.

    Example:
        ```python
        from focus import Collector, Workspace

        async with Workspace("runs/tools", max_parallel=8) as workspace:
            collector = Collector(agent, workspace=workspace)
        ```

    Args:
        path: The root directory, created if missing and always kept; None for a fresh
            temporary directory, removed when the workspace closes.
        max_parallel: The most tool executions at once; None for no limit.

    Raises:
        ConfigError: ``max_parallel`` is not an integer of at least 1.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]", None] = None, *, max_parallel: Optional[int] = None) -> None:
        if max_parallel is not None and (not isinstance(max_parallel, int) or isinstance(max_parallel, bool) or max_parallel < 1):
            raise ConfigError(f"Workspace: max_parallel must be an integer >= 1 or None, got {max_parallel!r}")
        self._given: Optional[Path] = None if path is None else Path(path)
        self.max_parallel = max_parallel
        self._root: Optional[Path] = None
        self._users = 0
        self._semaphore: Optional[asyncio.Semaphore] = None
        self._problems = 0

    @property
    def path(self) -> Path:
        """The root directory.

        Raises:
            ConfigError: The workspace is not open.
        """
        if self._root is None:
            raise ConfigError("Workspace is not open: use `async with workspace:` (or a Collector that holds it)")
        return self._root

    @property
    def is_open(self) -> bool:
        """Whether the workspace is open (entered at least once and not yet fully exited)."""
        return self._root is not None

    async def __aenter__(self) -> "Workspace":
        if self._users == 0:
            if self._given is None:
                self._root = Path(tempfile.mkdtemp(prefix="focus-workspace-"))
            else:
                self._given.mkdir(parents=True, exist_ok=True)
                self._root = self._given
            self._semaphore = None if self.max_parallel is None else asyncio.Semaphore(self.max_parallel)
        self._users += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._users == 0:
            return
        self._users -= 1
        if self._users == 0:
            root, self._root, self._semaphore = self._root, None, None
            if self._given is None and root is not None:
                shutil.rmtree(root, ignore_errors=True)

    def problem_dir(self, problem_id: Optional[str] = None) -> Path:
        """Create a new working directory under the root for one collection.

        Args:
            problem_id: Added to the directory's name, made filesystem-safe.

        Returns:
            The directory, named by a number in creation order and the problem id.

        Raises:
            ConfigError: The workspace is not open.
        """
        self._problems += 1
        name = f"{self._problems:04d}"
        if problem_id:
            name += "-" + _UNSAFE.sub("_", str(problem_id))[:64]
        directory = self.path / name
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the ``max_parallel`` tool-execution slots (no wait without a limit)."""
        semaphore = self._semaphore
        if semaphore is None:
            yield
            return
        async with semaphore:
            yield

    def __repr__(self) -> str:
        where = self._root if self._root is not None else (self._given or "<temporary>")
        return f"Workspace({str(where)!r}, max_parallel={self.max_parallel!r})"
