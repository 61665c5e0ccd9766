"""A loopback HTTP server for the command-line tests that stands in front of a simulated
server and misbehaves on request: it forwards every call, and in a chosen mode answers
``/generate`` with empty completions, without logprobs (null), with garbage, with a stop
of no tokens, with aborts, with ids outside the vocabulary, never answers it, answers 503
on ``/health``, or 503 on everything; it can also claim another model or weight version."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional


class FaultyProxy:
    """``mode``: "pass" (forward), "empty" (every /generate answered with 0 tokens and
    finish_reason length), "null_logprobs" (every generated token's logprob null),
    "garbage" (200 with a body that is not JSON), "hang" (/generate never answered),
    "starting" (/health answers 503 for the first ``starting_for`` calls), "zero_stop" (0
    tokens, finish_reason stop: what no SGLang sends), "abort" (finish_reason abort with the
    tokens so far), "oov" (each id replaced by OOV_ID, outside any vocabulary), "down" (503
    on every call). ``model``, when set, replaces the model path (and tokenizer path) the
    model info names; ``weight_version``, when set, the weight version the model info and
    every /generate answer name once ``version_after`` /generate calls have come (both may change
    while it runs). ``generates`` counts the /generate calls. ``url`` is the proxy's base URL."""

    def __init__(self, upstream: str, mode: str = "pass", starting_for: int = 0, model: Optional[str] = None,
                 weight_version: Optional[str] = None, version_after: int = 0) -> None:
        self.upstream, self.mode, self.starting_for, self.model = upstream.rstrip("/"), mode, starting_for, model
        self.weight_version, self.version_after = weight_version, version_after
        self.health_calls = 0
        self.generates = 0
        self.release = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self, body: Optional[bytes]) -> None:
                req = urllib.request.Request(proxy.upstream + self.path, data=body, method=self.command,
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=60) as resp:
                        code, data = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    code, data = exc.code, exc.read()
                if proxy.mode == "empty" and self.path == "/generate" and code == 200:
                    data = json.dumps(_emptied(json.loads(data))).encode()
                if proxy.mode == "null_logprobs" and self.path == "/generate" and code == 200:
                    data = json.dumps(_without_logprobs(json.loads(data))).encode()
                if proxy.mode == "garbage" and self.path == "/generate":
                    code, data = 200, b"<html>upstream error</html>"
                if proxy.mode in MALFORMED and self.path == "/generate" and code == 200:
                    data = json.dumps(_each(json.loads(data), MALFORMED[proxy.mode])).encode()
                version = proxy.weight_version if proxy.generates > proxy.version_after else None
                if version is not None and self.path == "/generate" and code == 200:
                    data = json.dumps(_each(json.loads(data), lambda r: _meta(r, weight_version=version))).encode()
                if self.path in ("/get_model_info", "/model_info") and code == 200:
                    info = json.loads(data)
                    if proxy.model is not None:
                        info.update(model_path=proxy.model, tokenizer_path=proxy.model)
                    if version is not None:
                        info.update(weight_version=version)
                    data = json.dumps(info).encode()
                self._send(code, data)

            def do_GET(self) -> None:
                if proxy.mode == "down":
                    self._send(503, b"")
                    return
                if self.path == "/health":
                    proxy.health_calls += 1
                    if proxy.mode == "starting" and proxy.health_calls <= proxy.starting_for:
                        self._send(503, b"")
                        return
                self._forward(None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if proxy.mode == "down":
                    self._send(503, b"")
                    return
                if self.path == "/generate":
                    proxy.generates += 1
                if proxy.mode == "hang" and self.path == "/generate":
                    proxy.release.wait(120)
                    return
                self._forward(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FaultyProxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _emptied(response: Any) -> Any:
    """An SGLang /generate response with its output removed: no text, no tokens, finish
    reason length (a batch is a list of them)."""
    if isinstance(response, list):
        return [_emptied(r) for r in response]
    meta = dict(response.get("meta_info", {}))
    meta.update(completion_tokens=0, output_token_logprobs=[], finish_reason={"type": "length", "length": 0})
    return {**response, "text": "", "output_ids": [], "meta_info": meta}


def _without_logprobs(response: Any) -> Any:
    """An SGLang /generate response whose generated tokens have a null logprob each (what
    SGLang writes for -inf or NaN): the ids stay, the logprobs are gone."""
    if isinstance(response, list):
        return [_without_logprobs(r) for r in response]
    meta = dict(response.get("meta_info", {}))
    meta["output_token_logprobs"] = [[None, *entry[1:]] for entry in meta.get("output_token_logprobs") or []]
    return {**response, "meta_info": meta}


OOV_ID = 2**31
"""The id the "oov" mode answers with: outside any tokenizer's vocabulary."""


def _each(response: Any, change: Any) -> Any:
    """``change`` applied to an SGLang /generate response (to each of a batch's)."""
    return [change(r) for r in response] if isinstance(response, list) else change(response)


def _meta(response: Any, **fields: Any) -> Any:
    return {**response, "meta_info": {**response.get("meta_info", {}), **fields}}


def _zero_stop(response: Any) -> Any:
    """No tokens and finish_reason stop: SGLang returns the EOS id it stopped at, so this
    answer is malformed."""
    out = _meta(response, completion_tokens=0, output_token_logprobs=[], finish_reason={"type": "stop", "matched": None})
    return {**out, "text": "", "output_ids": []}


def _aborted(response: Any) -> Any:
    return _meta(response, finish_reason={"type": "abort", "message": "Abort in waiting queue"})


def _oov(response: Any) -> Any:
    entries = [[lp, OOV_ID, *rest] for lp, _, *rest in response.get("meta_info", {}).get("output_token_logprobs") or []]
    return {**_meta(response, output_token_logprobs=entries), "output_ids": [OOV_ID] * len(entries)}


MALFORMED = {"zero_stop": _zero_stop, "abort": _aborted, "oov": _oov}
