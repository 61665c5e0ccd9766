"""focus-go: FOCUS tree-search RL data collection for language-model agents, with a Go core.

Importing this package is cheap: the Go library (libfocus.so) loads on first use.
The same package is importable as ``focus`` (``import focus`` gives this module), so every
documented path such as ``focus.integrations.slime.advantages`` works unchanged.

Do not ``fork()`` a process after focus-go has been used in it; use the ``spawn`` start
method for multiprocessing.
"""

from __future__ import annotations

from ._version import __version__
from .agent import Agent, Segments
from .collector import Collector
from .critic import Critic
from .env import Env, MathEnv, Step
from .search import Independent, Selective
from .tools import ToolEnv
from .workspace import Workspace
from .preparation import (
    ActorSample,
    Batch,
    CriticSample,
    DirectBranchTd,
    GroupBaseline,
    RewardConfig,
    TreeGroupBaseline,
)
from .errors import (
    BackendError,
    CollectionError,
    ConfigError,
    ConfigTypeError,
    FocusError,
    FocusTimeoutError,
    InternalError,
    InvalidHandleError,
    LibraryError,
    NotFoundError,
    OperationCancelled,
)

__all__ = [
    "Agent",
    "Collector",
    "Critic",
    "Env",
    "Independent",
    "MathEnv",
    "Segments",
    "Selective",
    "Step",
    "ToolEnv",
    "Workspace",
    "ActorSample",
    "Batch",
    "CriticSample",
    "DirectBranchTd",
    "GroupBaseline",
    "RewardConfig",
    "TreeGroupBaseline",
    "BackendError",
    "CollectionError",
    "ConfigError",
    "ConfigTypeError",
    "FocusError",
    "FocusTimeoutError",
    "InternalError",
    "InvalidHandleError",
    "LibraryError",
    "NotFoundError",
    "OperationCancelled",
    "__version__",
]
