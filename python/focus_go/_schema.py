"""The binding's schema: the contract between this package and the library, as the
library publishes it (``focus_schema``; Go's ``capi/binding``, pinned there by
``testdata/schema.json``).

It lists every JSON input the library reads (the collection spec, a policy's config,
sampling parameters, the parse, render and grade requests) with each object type's fields,
their types and the defaults the library decides; the configuration rules' kinds and
defaults (what ``_rules`` checks against); and the trainer record keys in order (what
``_records`` fills). The library decodes every input strictly: a key the schema does not
list is a ``ConfigError`` naming the key and the keys allowed. The schema is read from the
library on first use, once.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, Dict, List, Tuple

from . import _lib


@functools.lru_cache(maxsize=None)
def _loaded() -> Dict[str, Any]:
    return json.loads(_lib.call_string("focus_schema"))


def schema() -> Dict[str, Any]:
    """The whole schema: ``{"inputs", "types", "rules", "records"}`` (a fresh copy)."""
    return copy.deepcopy(_loaded())


def inputs() -> Dict[str, Dict[str, Any]]:
    """Every input by name: ``{"name", "functions", "type"}`` (a fresh copy)."""
    return {i["name"]: dict(i) for i in _loaded()["inputs"]}


def fields(type_name: str) -> Dict[str, Dict[str, Any]]:
    """The fields of object type ``type_name`` (e.g. ``"session.Spec"``) by key, in order:
    ``{"name", "type"}`` and ``"default"`` where the library decides one (a fresh copy)."""
    return {f["name"]: dict(f) for f in _loaded()["types"][type_name]["fields"]}


def field_defaults(type_name: str) -> Dict[str, Any]:
    """The defaults of object type ``type_name``'s fields that have one, by key."""
    return {name: copy.deepcopy(f["default"]) for name, f in fields(type_name).items() if "default" in f}


def rules_defaults() -> Dict[str, Any]:
    """The library's defaults (``_rules.defaults()``; a fresh copy)."""
    return copy.deepcopy(_loaded()["rules"]["defaults"])


def rule_kinds() -> List[str]:
    """The kinds of configuration object ``_rules.check`` accepts."""
    return list(_loaded()["rules"]["kinds"])


def record_keys(section: str) -> Tuple[str, ...]:
    """The record keys of ``section``, in order: ``"actor"``, ``"critic"``, or
    ``"path_extra"`` (what a path-layout actor record has after the actor keys)."""
    return tuple(_loaded()["records"][section])
