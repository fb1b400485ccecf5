"""A scriptable OpenAI-compatible HTTP server for tests of `pytest_llmeval.endpoint`: faults on demand.

It speaks just enough of the API (`POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`) for
the client, over real sockets, so what the tests see is what the `openai` package does with real bytes:
status codes and headers, bodies that are not JSON, sockets closed without an answer, answers that never come.

Its normal answer is deterministic and depends on the request (the prompt reversed, the model it was asked
for under a `served/` prefix, a fixed `system_fingerprint`), so a test can tell which request an answer
belongs to.
Faults are scripted per request: `by_prompt[prompt]` is consumed by the requests with that prompt, in order,
and `script` by any request in arrival order (the per-prompt script first); an empty script means a normal
answer. Every request is recorded (`received`), headers included, before anything else happens to it.

Some of its error messages repeat the API key they were sent, as careless servers do: the client must scrub
it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "Fault",
    "FaultServer",
    "Gauge",
    "Received",
    "dead_url",
    "drop",
    "hang",
    "malformed",
    "no_choices",
    "no_text",
    "not_json",
    "ok",
    "status",
]

FINGERPRINT = "fp_fault_server"


@dataclass(frozen=True)
class Fault:
    """What the server does with one request instead of answering it normally."""

    kind: str  # ok | status | hang | drop | malformed | not_json | no_choices | no_text
    status: int = 200
    message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0


def ok() -> Fault:
    """A normal answer (useful between faults in a script)."""
    return Fault("ok")


def status(code: int, message: str = "scripted failure", headers: Mapping[str, str] | None = None) -> Fault:
    """An error status with an OpenAI-style JSON error body and the given headers (e.g. Retry-After)."""
    return Fault("status", status=code, message=message, headers=tuple((headers or {}).items()))


def hang(seconds: float = 30.0) -> Fault:
    """No answer for `seconds` (or until the server closes), then the normal answer if anyone listens."""
    return Fault("hang", seconds=seconds)


def drop() -> Fault:
    """The connection is closed after the request is read, without a single byte of response."""
    return Fault("drop")


def malformed() -> Fault:
    """200, `application/json`, and a body cut off in the middle of the JSON."""
    return Fault("malformed")


def not_json() -> Fault:
    """200 with an HTML page, as a proxy in front of a busy server sends."""
    return Fault("not_json")


def no_choices() -> Fault:
    """200 with valid JSON that has no `choices`."""
    return Fault("no_choices")


def no_text() -> Fault:
    """200 with a well-formed completion whose text is null (as reasoning or tool-call answers can be)."""
    return Fault("no_text")


class Gauge:
    """Requests in flight and the most there ever were at once; one gauge may be shared by several servers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current = 0
        self.peak = 0

    def enter(self) -> None:
        with self._lock:
            self.current += 1
            self.peak = max(self.peak, self.current)

    def leave(self) -> None:
        with self._lock:
            self.current -= 1


@dataclass(frozen=True)
class Received:
    """One request as the server read it."""

    method: str
    path: str  # with the query string
    headers: dict[str, str]  # names lower-cased
    body: Any  # decoded JSON, or None for GET
    at: float  # time.monotonic() on arrival
    fault: str  # the scripted fault's kind, or "" for requests no script applied to

    @property
    def prompt(self) -> str | None:
        return _prompt_of(self.body) if isinstance(self.body, dict) else None


def _prompt_of(body: dict[str, Any]) -> str | None:
    if "messages" in body:
        messages = body["messages"]
        return str(messages[-1]["content"]) if messages else None
    prompt = body.get("prompt")
    return prompt if isinstance(prompt, str) else None


class FaultServer:
    """An OpenAI-compatible server on 127.0.0.1 (a free port) whose answers tests script; a context manager"""

    def __init__(
        self,
        *,
        models: Iterable[str] = ("tiny",),
        api_key: str | None = None,
        reject_seed: bool = False,
        max_prompt_chars: int | None = None,
        delay_s: float | Callable[[str], float] = 0.0,
        quantization: str | None = None,
        list_models: bool = True,
        report_model_as: str | None = None,
        gauge: Gauge | None = None,
        report_usage: bool = True,
        echo_key: bool = False,
    ) -> None:
        self.models = list(models)
        self.api_key = api_key  # None: any key (or none) is accepted
        self.reject_seed = reject_seed
        self.max_prompt_chars = max_prompt_chars
        # How long a normal answer takes: a constant, or a function of the prompt (shuffles the finish order).
        self.delay_s = delay_s
        self.quantization = quantization  # reported in the /v1/models entries when set
        self.list_models = list_models  # False: GET /v1/models is a 404, as on servers that lack it
        # The `model` of its answers; None: "served/<the id asked for>".
        self.report_model_as = report_model_as
        self.report_usage = report_usage  # False: answers carry no `usage`, as some servers' do not
        # True: every answer repeats the request's Authorization header in its text, model and
        # system_fingerprint, as a careless proxy might on the success path.
        self.echo_key = echo_key
        # Counts the completion requests being answered (pass one gauge to several servers to count them all).
        self.gauge = gauge if gauge is not None else Gauge()
        self.script: deque[Fault] = deque()
        self.by_prompt: dict[str, deque[Fault]] = {}
        # Model id -> the fault every generation for it meets (the start-up probe, max_tokens 1, is answered).
        self.by_model: dict[str, Fault] = {}
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------------------------------

    def fail(self, prompt: str, *faults: Fault) -> None:
        """The next requests with this prompt meet these faults, one each in order; later ones get answers."""
        self.by_prompt.setdefault(prompt, deque()).extend(faults)

    def fail_every_generation(self, model_id: str, fault: Fault) -> None:
        """Every request for `model_id` meets `fault`, except the start-up probe (max_tokens 1), which is
        answered: a server that looks healthy when the run starts and fails every row of one model."""
        self.by_model[model_id] = fault

    def posts(self, prompt: str | None = None) -> list[Received]:
        """The completion requests received (optionally only those with this prompt), in arrival order."""
        with self._lock:
            return [r for r in self.received if r.method == "POST" and (prompt is None or r.prompt == prompt)]

    # -- lifecycle -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The /v1 base URL."""
        assert self._httpd is not None, "the server is not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FaultServer:
        httpd = _Server(("127.0.0.1", 0), _handler_for(self))
        # Handlers stuck in a hang or on an idle keep-alive connection must not hold up close().
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()  # releases every hanging handler
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- what the handler asks -------------------------------------------------------------------------------

    def _record(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)

    def _next_fault(self, prompt: str | None, body: Any = None) -> Fault | None:
        with self._lock:
            if isinstance(body, dict) and body.get("model") in self.by_model and body.get("max_tokens") != 1:
                return self.by_model[body["model"]]
            queue = self.by_prompt.get(prompt) if prompt is not None else None
            if queue:
                return queue.popleft()
            if self.script:
                return self.script.popleft()
            return None

    @property
    def max_in_flight(self) -> int:
        return self.gauge.peak

    def _delay_for(self, prompt: str) -> float:
        return self.delay_s(prompt) if callable(self.delay_s) else self.delay_s


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops connections a burst of requests opens at once, and a dropped SYN costs
    # the client a one-second retransmit: tests would measure the kernel instead of the client.
    request_queue_size = 128


def dead_url() -> str:
    """A /v1 URL on a local port nothing listens on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _error_body(message: str, code: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def _completion(
    body: dict[str, Any], text: str | None, *, chat: bool, model: str, usage: bool = True
) -> dict[str, Any]:
    prompt = body["messages"][-1]["content"] if chat else str(body.get("prompt", ""))
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
            "logprobs": None,
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
        obj = "text_completion"
    return {
        "id": "cmpl-fault-server",
        "object": obj,
        "created": 0,
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": [choice],
        # One "token" per character: counts a test can work out from the prompt and the answer.
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(text or ""),
            "total_tokens": len(prompt),
        }
        if usage
        else None,
    }


def _handler_for(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as real servers do, so the client's connection pool is exercised too.
        protocol_version = "HTTP/1.1"
        # Headers and body leave in separate writes: with Nagle on, a keep-alive connection waits out the
        # client's delayed ACK (40 ms) before each body.
        disable_nagle_algorithm = True

        # True while this request counts in the server's gauge. It stops counting just before its answer is
        # written: once the client holds the answer it may send its next request, which must not meet this
        # one still counted (that race read a bound of 4 as 5 on a loaded machine).
        in_gauge = False

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test output stays clean

        def _leave_gauge(self) -> None:
            if self.in_gauge:
                self.in_gauge = False
                server.gauge.leave()

        def _send_json(self, code: int, payload: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
            self._send_bytes(code, json.dumps(payload).encode(), "application/json", headers)

        def _send_bytes(
            self, code: int, data: bytes, content_type: str, headers: Iterable[tuple[str, str]] = ()
        ) -> None:
            self._leave_gauge()
            try:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                self.close_connection = True  # the client gave up (a hang it timed out on): nothing to do

        def _auth_refused(self) -> bool:
            if server.api_key is None:
                return False
            sent = self.headers.get("Authorization", "")
            if sent == f"Bearer {server.api_key}":
                return False
            # Deliberately careless: the key it was sent comes back in the message.
            self._send_json(
                401, _error_body(f"Incorrect API key provided: {sent.removeprefix('Bearer ')}", 401)
            )
            return True

        def do_GET(self) -> None:
            server._record(Received("GET", self.path, _headers(self), None, time.monotonic(), ""))
            if self._auth_refused():
                return
            if self.path.split("?")[0] != "/v1/models" or not server.list_models:
                self._send_json(404, _error_body(f"no route {self.path}", 404))
                return
            entries = []
            for model in server.models:
                entry: dict[str, Any] = {"id": model, "object": "model", "created": 0, "owned_by": "fault"}
                if server.quantization is not None:
                    entry["quantization"] = server.quantization
                entries.append(entry)
            self._send_json(200, {"object": "list", "data": entries})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            prompt = _prompt_of(body) if isinstance(body, dict) else None
            fault = server._next_fault(prompt, body)
            server._record(
                Received(
                    "POST", self.path, _headers(self), body, time.monotonic(), fault.kind if fault else ""
                )
            )
            server.gauge.enter()
            self.in_gauge = True
            try:
                self._answer(body, prompt, fault)
            finally:
                self._leave_gauge()

        def _answer(self, body: Any, prompt: str | None, fault: Fault | None) -> None:
            path = self.path.split("?")[0]
            chat = path == "/v1/chat/completions"
            if not chat and path != "/v1/completions":
                self._send_json(404, _error_body(f"no route {self.path}", 404))
                return
            if not isinstance(body, dict) or prompt is None:
                self._send_json(400, _error_body("the body is not a completion request", 400))
                return
            if fault is not None and fault.kind != "ok":
                if fault.kind == "status":
                    self._send_json(fault.status, _error_body(fault.message, fault.status), fault.headers)
                    return
                if fault.kind == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault.kind == "malformed":
                    self._send_bytes(
                        200, b'{"id": "cmpl-1", "choices": [{"index": 0, "mess', "application/json"
                    )
                    return
                if fault.kind == "not_json":
                    self._send_bytes(200, b"<html><body>502 Bad Gateway</body></html>", "text/html")
                    return
                if fault.kind == "no_choices":
                    self._send_json(200, {"id": "cmpl-1", "object": "chat.completion", "model": "x"})
                    return
                if fault.kind == "no_text":
                    self._send_json(200, _completion(body, None, chat=chat, model=self._model(body)))
                    return
                if fault.kind == "hang":
                    server._stopping.wait(fault.seconds)
                else:
                    raise AssertionError(f"unknown fault {fault.kind}")
            if self._auth_refused():
                return
            model = body.get("model")
            if model not in server.models:
                # vLLM's shape: a top-level message, no "error" object.
                self._send_json(
                    404,
                    {
                        "object": "error",
                        "message": f"The model `{model}` does not exist.",
                        "type": "NotFoundError",
                    },
                )
                return
            if server.reject_seed and "seed" in body:
                self._send_json(400, _error_body("Unrecognized request argument supplied: seed", 400))
                return
            if server.max_prompt_chars is not None and len(prompt) > server.max_prompt_chars:
                message = (
                    f"This model's maximum context length is {server.max_prompt_chars} tokens. "
                    f"However, you requested {len(prompt)} tokens. Please reduce the length of the messages."
                )
                self._send_json(400, _error_body(message, 400))
                return
            delay = server._delay_for(prompt)
            if delay > 0:
                server._stopping.wait(delay)
            answer = _completion(
                body, prompt[::-1], chat=chat, model=self._model(body), usage=server.report_usage
            )
            if server.echo_key:
                auth = self.headers.get("Authorization", "")
                answer["model"] = f"{answer['model']} ({auth})"
                answer["system_fingerprint"] = f"fp {auth}"
                choice = answer["choices"][0]
                if chat:
                    choice["message"]["content"] += f" {auth}"
                else:
                    choice["text"] += f" {auth}"
            self._send_json(200, answer)

        def _model(self, body: dict[str, Any]) -> str:
            return server.report_model_as or f"served/{body.get('model')}"

    return Handler


def _headers(handler: BaseHTTPRequestHandler) -> dict[str, str]:
    return {name.lower(): value for name, value in handler.headers.items()}
