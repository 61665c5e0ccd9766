"""Security: API keys never reach errors, records or output; model output and tool-call
arguments are data, never evaluated; JsonlDirectory writes atomically under safe names;
the simulated (demo) server listens on loopback only."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket

import pytest

from focus_go import Agent, Collector, Independent, MathEnv, Segments
from focus_go.backends import SamplingParams, SGLangPolicy, VLLMPolicy
from focus_go.env import grade_math
from focus_go.errors import ConfigError, FocusError
from focus_go.generation.openai import OpenAIChatPolicy
from focus_go.generation.parsing import HermesToolCallParser, QwenXMLToolCallParser
from focus_go.generation.types import GenerateResult
from focus_go.integrations import JsonlDirectory

KEY = "sk-focus-TEST-7f3a9c1e5b2d4f6a8c0e"


def refused_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_api_key_never_in_errors_records_or_output(server, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    seen = []
    problem = server.problems()[0]
    for make in (
        lambda url: VLLMPolicy(model=server.model, base_url=url + "/v1", api_key=KEY, profile="token_chunk"),
        lambda url: OpenAIChatPolicy(model=server.model, base_url=url + "/v1", api_key=KEY),
    ):
        # A working server: the key is sent, and appears in nothing the library returns.
        policy = make(server.url)
        try:
            seen += [repr(policy), str(vars(policy))]
            reply = policy.generate(policy.prepare([{"role": "user", "content": problem.prompt}], []), SamplingParams(max_tokens=16))
            seen.append(repr(reply))
            if isinstance(policy, VLLMPolicy):
                agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(64))
                collector = Collector(agent, search=Independent(2))
                state = asyncio.run(collector.collect(problem))
                seen += [state.to_json(), json.dumps(collector.prepare(state).to_records(0))]
                state.close()
        finally:
            policy.close()
        # A refused connection: the error names the server, not the key.
        policy = make(refused_url())
        try:
            with pytest.raises(FocusError) as info:
                policy.generate(policy.prepare([{"role": "user", "content": "hi"}], []), SamplingParams(max_tokens=4))
            seen += [str(info.value), repr(info.value)]
            if isinstance(policy, VLLMPolicy):
                agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(64))
                state = asyncio.run(Collector(agent, search=Independent(2)).collect(problem, allow_partial=True))
                assert len(state.failures) == 2
                seen += [f[1] for f in state.failures] + [state.to_json()]
                state.close()
        finally:
            policy.close()
    # Credentials in the URL are refused without echoing them.
    with pytest.raises(ConfigError) as info:
        SGLangPolicy(model=server.model, base_url=f"http://user:{KEY}@127.0.0.1:1", profile="token_chunk")
    seen.append(str(info.value))
    out, err = capfd.readouterr()
    seen += [out, err, caplog.text]
    assert len(seen) > 10
    for text in seen:
        assert KEY not in text
        assert KEY[8:] not in text


PAYLOADS = [
    '__import__("os").system("touch {marker}")',
    'open("{marker}", "w").write("x")',
    "$(touch {marker})",
    "`touch {marker}`",
    '{{"__class__": "os.system", "arg": "touch {marker}"}}',
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_model_output_is_never_evaluated(tmp_path, payload):
    marker = tmp_path / "pwned"
    code = payload.format(marker=marker)
    # The grader compares text; it does not run the answer.
    assert grade_math(f"The answer is \\boxed{{{code}}}.", "4") is False
    assert grade_math(f"\\boxed{{{code}}}", f"\\boxed{{{code}}}") is True
    # Tool-call arguments are parsed into data; nothing runs them.
    args = {"command": code, "expr": code}
    hermes = HermesToolCallParser().parse(
        GenerateResult(text=f'<tool_call>\n{json.dumps({"name": "run", "arguments": args})}\n</tool_call>')
    )
    assert [(c.name, json.loads(c.arguments)) for c in hermes.tool_calls] == [("run", args)]
    xml = QwenXMLToolCallParser().parse(
        GenerateResult(text=f"<tool_call>\n<function=run>\n<parameter=command>\n{code}\n</parameter>\n</function>\n</tool_call>")
    )
    # Qwen3-XML parameters that look like JSON become JSON values: data either way.
    ((name, xml_args),) = [(c.name, json.loads(c.arguments)) for c in xml.tool_calls]
    assert name == "run" and xml_args["command"] in (code, _json_or_none(code))
    assert not marker.exists()


def _json_or_none(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def test_jsonl_directory_failed_write_leaves_no_file(tmp_path, monkeypatch):
    sink = JsonlDirectory(tmp_path)

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space"):
        sink([{"context": "c", "target": 0.5, "problem_id": "p"}])
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []  # neither the record file nor its temporary
    sink([{"context": "c", "target": 0.5, "problem_id": "../../p"}])
    (written,) = tmp_path.iterdir()
    assert written.parent == tmp_path and written.name.startswith("_") or written.name.startswith("p")


def _non_loopback_address():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: this only picks a route
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_simulated_server_listens_on_loopback_only(server):
    assert server.url.startswith("http://127.0.0.1:")
    port = int(server.url.rsplit(":", 1)[1])
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to probe from")
    with socket.socket() as s:
        s.settimeout(2)
        with pytest.raises(OSError):
            s.connect((address, port))
