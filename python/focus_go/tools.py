"""ToolEnv: an environment whose actions are tool-calling turns.

``ToolEnv(tools, *, answer=None, schemas=None)`` maps tool names to Python callables (sync
or async). Each step takes one parsed assistant turn (a ToolTurn):

- a turn with tool calls runs every call (concurrently, each holding one slot of the
  Workspace's ``max_parallel`` limit when the collector has a Workspace) and returns one
  ``{"role": "tool", "name", "content"}`` message per call, in call order, with reward
  0.0 and ``done=False``;
- a turn without tool calls ends the episode: reward ``answer(turn.text)`` (the visible
  text, reasoning and tool blocks removed; ``answer`` may be sync or async) or 0.0 when no
  ``answer`` was given, ``done=True``.

Calls are parsed, never evaluated: arguments are ``json.loads``'d and must be a JSON
object, passed as keyword arguments. Nothing a model writes raises: a call the parser
marked malformed (``ToolCall.error``: invalid JSON, no name, arguments that are not an
object, ...) is never run and is answered with ``"Error: could not parse the tool call
...: <reason>"``; an unknown tool, arguments that are not a JSON object, arguments that do
not fit the signature, and a tool that raises all become a tool message starting with
``"Error: "`` (with the exception text), so the model sees its mistake and the branch goes
on. ``Step.info["tool_calls"]`` lists each call's ``name``, ``error`` (None when it ran)
and ``malformed`` (True when the parser could not decode it, so it did not run). A tool that takes a ``workspace`` keyword gets
the collection's working directory (a ``pathlib.Path``; None outside a Collector with a
Workspace); the model cannot set it. A tool's return value becomes the message content:
a str as it is, None as "", anything else as JSON.

Tool schemas (the chat template's ``tools``, what the model is shown) are derived from
each callable: the name is the mapping key, the description the docstring's first
paragraph, and the parameters come from the signature (``str`` → string, ``int`` →
integer, ``float`` → number, ``bool`` → boolean, lists/tuples → array, dicts → object,
``Optional[X]`` → X, ``Literal[...]`` → enum; anything else is unconstrained), required
when they have no default, described by Google-style ``Args:`` lines of the docstring.
``schemas={name: schema}`` gives a schema explicitly instead, either the OpenAI form
``{"type": "function", "function": {...}}`` or just its ``function`` part.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import re
import typing
from pathlib import Path
from typing import Any, Awaitable, Callable, ClassVar, Dict, List, Mapping, Optional, Tuple, Union

from .env import Env, Step
from .errors import ConfigError
from .types import ActionKind, Message, ToolCall, ToolTurn

ToolFunction = Callable[..., Any]
"""A tool: a sync or async callable taking JSON-typed keyword arguments (and optionally
``workspace``)."""

_ARG_LINE = re.compile(r"^\s*(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$")


def _doc_parts(doc: str) -> Tuple[str, Dict[str, str]]:
    """The first paragraph of a docstring and its ``Args:`` descriptions."""
    lines = doc.splitlines()
    description: List[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line):
            break
        description.append(line.strip())
    params: Dict[str, str] = {}
    section: Optional[str] = None
    current: Optional[str] = None
    indent: Optional[int] = None  # of the section's first argument line
    for line in lines:
        m = _SECTION.match(line)
        if m:
            section, current, indent = m.group(1), None, None
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        arg = _ARG_LINE.match(line)
        if arg and (indent is None or depth <= indent):
            indent = depth if indent is None else indent
            current = arg.group(1).lstrip("*")
            params[current] = arg.group(2).strip()
        elif current is not None:
            params[current] = (params[current] + " " + line.strip()).strip()
    return " ".join(description), params


def _json_type(annotation: Any) -> Dict[str, Any]:
    """The JSON schema of a parameter annotation (empty: unconstrained)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType"):
        rest = [a for a in args if a is not type(None)]
        return _json_type(rest[0]) if len(rest) == 1 else {}
    if origin is typing.Literal:
        values = list(args)
        schema = _json_type(type(values[0])) if values and all(type(v) is type(values[0]) for v in values) else {}
        return {**schema, "enum": values}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is str:
        return {"type": "string"}
    if annotation in (list, tuple) or origin in (list, tuple, typing.Sequence, getattr(typing, "Sequence", None)):
        items = _json_type(args[0]) if args and args[0] is not Ellipsis else {}
        return {"type": "array", "items": items} if items else {"type": "array"}
    if annotation is dict or origin in (dict, typing.Mapping):
        return {"type": "object"}
    if origin is not None:
        import collections.abc as abc

        if origin in (abc.Sequence, abc.MutableSequence):
            items = _json_type(args[0]) if args else {}
            return {"type": "array", "items": items} if items else {"type": "array"}
        if origin in (abc.Mapping, abc.MutableMapping):
            return {"type": "object"}
    return {}


def tool_schema(name: str, fn: ToolFunction) -> Dict[str, Any]:
    """The OpenAI-style function schema derived from ``fn``'s signature and docstring (see
    the module documentation)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"ToolEnv: cannot read the signature of tool {name!r}: {exc}; pass schemas={{{name!r}: ...}}") from exc
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        hints = {}
    description, docs = _doc_parts(inspect.getdoc(fn) or "")
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for p in signature.parameters.values():
        if p.name == "workspace" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            continue
        schema = dict(_json_type(hints.get(p.name, p.annotation)))
        if p.name in docs and docs[p.name]:
            schema["description"] = docs[p.name]
        properties[p.name] = schema
        if p.default is p.empty:
            required.append(p.name)
    function: Dict[str, Any] = {"name": name}
    if description:
        function["description"] = description
    function["parameters"] = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": function}


def _explicit_schema(name: str, schema: Mapping[str, Any]) -> Dict[str, Any]:
    if not isinstance(schema, Mapping):
        raise ConfigError(f"ToolEnv: schemas[{name!r}] must be a JSON-schema dict, got {type(schema).__name__}")
    function = schema.get("function") if schema.get("type") == "function" else schema
    if not isinstance(function, Mapping):
        raise ConfigError(f"ToolEnv: schemas[{name!r}] has no function definition")
    if function.get("name", name) != name:
        raise ConfigError(f"ToolEnv: schemas[{name!r}] names the function {function.get('name')!r}")
    out = dict(function)
    out["name"] = name
    return {"type": "function", "function": out}


def _content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


class ToolEnv(Env):
    """An environment whose actions are tool-calling turns: it runs the tool calls of each
    assistant turn and grades the final answer.

    Each step takes one parsed assistant turn (a ``ToolTurn``):

    - A turn with tool calls runs every call, concurrently (each holding one slot of the
      workspace's ``max_parallel`` limit when the collector has a ``Workspace``), and
      returns one ``{"role": "tool", "name", "content"}`` message per call, in call order,
      with reward 0.0.
    - A turn without tool calls ends the episode with reward ``answer(turn.text)`` (the
      visible text, reasoning and tool blocks removed), or 0.0 when there is no
      ``answer``.

    Calls are parsed, never evaluated: arguments must be a JSON object and are passed as
    keyword arguments. Nothing a model writes raises. A malformed call, an unknown tool,
    arguments that do not fit the signature, and a tool that raises all become a tool
    message starting with ``"Error: "``, so the model sees its mistake and the branch goes
    on. ``Step.info["tool_calls"]`` lists each call's ``name``, ``error`` (None when it
    ran) and ``malformed`` (True when the parser could not decode it). A tool's return
    value becomes the message content: a ``str`` as it is, None as ``""``, anything else as
    JSON. A tool that takes a ``workspace`` keyword argument gets the collection's working
    directory (a ``pathlib.Path``, or None without a workspace); the model cannot set it.

    The schemas shown to the model are derived from each callable: the name is the
    mapping key, the description the docstring's first paragraph, and the parameters come
    from the signature (``str``, ``int``, ``float``, ``bool``, lists, dicts, ``Optional``
    and ``Literal`` map to their JSON types), required when they have no default and
    described by the docstring's Google-style ``Args:`` lines.

    Example:
        ```python
        from focus import ToolEnv

        def add(a: int, b: int) -> int:
            '''Add two integers.

            Args:
                a: The first number.
                b: The second number.
            '''
            return a + b

        env = ToolEnv({"add": add}, answer=lambda text: float("42" in text))
        ```

    Args:
        tools: Tool names mapped to Python callables, synchronous or ``async``.
        answer: Grades the final answer's text, returning its reward (may be ``async``);
            None gives 0.0.
        schemas: Explicit schemas for some tools, by name, in place of the derived ones:
            the OpenAI form ``{"type": "function", "function": {...}}`` or just its
            ``function`` part.

    Raises:
        ConfigError: ``tools`` is not a mapping of names to callables, ``answer`` is not
            callable, or ``schemas`` names an unknown tool.
    """

    action: ClassVar[ActionKind] = "tool"

    def __init__(
        self,
        tools: Mapping[str, ToolFunction],
        *,
        answer: Optional[Callable[[str], Union[float, Awaitable[float]]]] = None,
        schemas: Optional[Mapping[str, Mapping[str, Any]]] = None,
    ) -> None:
        if not isinstance(tools, Mapping):
            raise ConfigError(f"ToolEnv: tools must be a mapping of name -> callable, got {type(tools).__name__}")
        for name, fn in tools.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"ToolEnv: tool names must be non-empty strings, got {name!r}")
            if not callable(fn):
                raise ConfigError(f"ToolEnv: tool {name!r} is a {type(fn).__name__}, not callable")
        if answer is not None and not callable(answer):
            raise ConfigError(f"ToolEnv: answer must be callable or None, got {type(answer).__name__}")
        unknown = set(schemas or ()) - set(tools)
        if unknown:
            raise ConfigError(f"ToolEnv: schemas for unknown tools {sorted(unknown)}")
        self.tools: Dict[str, ToolFunction] = dict(tools)
        self.answer = answer
        self._schemas = [
            _explicit_schema(name, schemas[name]) if schemas and name in schemas else tool_schema(name, fn)
            for name, fn in self.tools.items()
        ]
        self._takes_workspace = {name: _takes_workspace(fn) for name, fn in self.tools.items()}
        self.workspace_dir: Optional[Path] = None
        self._slot: Optional[Callable[[], Any]] = None
        self.turns = 0

    def tool_schemas(self) -> List[Dict[str, Any]]:
        """The tool schemas shown to the model (the chat template's ``tools``)."""
        return copy.deepcopy(self._schemas)

    def bind(self, workspace_dir: Optional[Path], slot: Optional[Callable[[], Any]]) -> "ToolEnv":
        """A fork whose tools run in ``workspace_dir`` under ``slot()`` (an async context
        manager, e.g. ``Workspace.slot``). The Collector binds the env of each collection."""
        twin = self.fork()
        twin.workspace_dir, twin._slot = workspace_dir, slot
        return twin

    def fork(self) -> "ToolEnv":
        """An independent copy that shares the tools, grader and workspace binding."""
        twin = copy.copy(self)
        return twin

    async def step(self, action: ToolTurn) -> Step:
        if not isinstance(action, ToolTurn):
            raise ConfigError(f"ToolEnv.step takes a ToolTurn, got {type(action).__name__}")
        self.turns += 1
        if not action.tool_calls:
            reward = 0.0
            if self.answer is not None:
                value = self.answer(action.text)
                if inspect.isawaitable(value):
                    value = await value
                reward = float(value)
            return Step(reward=reward, done=True, info={"answer": action.text})
        results = await asyncio.gather(*(self._run(call) for call in action.tool_calls))
        messages: List[Message] = []
        calls = []
        for call, (content, error) in zip(action.tool_calls, results):
            message: Message = {"role": "tool", "name": call.name, "content": content}
            if call.call_id:
                message["tool_call_id"] = call.call_id
            messages.append(message)
            calls.append({"name": call.name, "error": error, "malformed": bool(getattr(call, "error", ""))})
        return Step(observation=messages, reward=0.0, done=False, info={"tool_calls": calls})

    async def _run(self, call: ToolCall) -> Tuple[str, Optional[str]]:
        """One call's message content and error (None when the tool ran)."""
        malformed = getattr(call, "error", "")
        if malformed:
            # The parser could not decode the call: its arguments are raw model text, so the
            # tool must not see them. The model is told why, as agent frameworks do.
            named = f" to {call.name}" if call.name else ""
            error = f"could not parse the tool call{named}: {malformed}"
            return "Error: " + error, error
        fn = self.tools.get(call.name)
        if fn is None:
            error = f"unknown tool {call.name!r}; available: {', '.join(sorted(self.tools))}"
            return "Error: " + error, error
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError as exc:
            error = f"arguments of {call.name} are not valid JSON ({exc}): {call.arguments[:200]}"
            return "Error: " + error, error
        if not isinstance(args, dict):
            error = f"arguments of {call.name} must be a JSON object, got {type(args).__name__}"
            return "Error: " + error, error
        args.pop("workspace", None)
        if self._takes_workspace[call.name]:
            args["workspace"] = self.workspace_dir
        try:
            inspect.signature(fn).bind(**args)
        except TypeError as exc:
            error = f"bad arguments for {call.name}: {exc}"
            return "Error: " + error, error
        except ValueError:
            pass  # no signature to check against: let the call decide
        try:
            async with _maybe(self._slot):
                if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):
                    value = await fn(**args)
                else:
                    value = await asyncio.to_thread(fn, **args)
                    if inspect.isawaitable(value):
                        value = await value
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = f"{call.name} raised {type(exc).__name__}: {exc}"
            return "Error: " + error, error
        return _content(value), None

    def __repr__(self) -> str:
        return f"ToolEnv(tools={sorted(self.tools)}, answer={'set' if self.answer else None})"


def _takes_workspace(fn: ToolFunction) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    p = params.get("workspace")
    return p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)


class _NoSlot:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


def _maybe(slot: Optional[Callable[[], Any]]) -> Any:
    return _NoSlot() if slot is None else slot()
