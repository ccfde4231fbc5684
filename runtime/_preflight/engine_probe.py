"""Ask one external SGLang engine what slime asks it first (runtime/_preflight/engines.py says what and where), with
http.client and a deadline, and classify the outcome: answered, refused, timed out, unreachable, not ready, wrong
answer, invalid. Standard library only; of the answer only the parsed JSON object is kept (never echoed whole: an
SGLang /server_info holds the server's api_key)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlparse

import attrs

Kind = Literal["answered", "refused", "timed out", "unreachable", "not ready", "wrong answer", "invalid"]
BODY_LIMIT = 8 << 20  # a /server_info is kilobytes; anything far larger is not one
READ_CHUNK = 1 << 16


@attrs.frozen
class Probe:
    """What one address did: its kind, a one-line detail, the server info it answered, the HTTP status of a
    wrong answer."""

    addr: str
    kind: Kind
    detail: str = ""
    answer: Mapping[str, object] | None = None
    status: int | None = None


class _Failed(Exception):
    def __init__(self, kind: Kind, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.kind, self.detail, self.status = kind, detail, status


def base_url(addr: str) -> str | None:
    """slime's normalize_external_engine_addr (slime/backends/sglang_utils/external.py:48-59 at 624b824): host:port
    or http://host:port (IPv6 in brackets) to an http base URL; None where slime raises ValueError."""
    url = (addr if "://" in addr else f"http://{addr}").rstrip("/")
    try:
        parsed = urlparse(url)
        ok = parsed.scheme == "http" and parsed.hostname is not None and parsed.port is not None
    except ValueError:  # a port out of range or not a number
        ok = False
    return url if ok else None


def _get(host: str, port: int, path: str, deadline: float, timeout: float) -> tuple[int, str, bytes]:
    """GET ``path``: (status, content type, body), all of it before ``deadline``."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Failed("timed out", f"no answer to GET {path} within {timeout:g} s")
    conn = http.client.HTTPConnection(host, port, timeout=left)
    try:
        conn.request("GET", path, headers={"Accept": "application/json", "User-Agent": "acrl-preflight"})
        response = conn.getresponse()
        body = bytearray()
        while chunk := response.read1(READ_CHUNK):
            body += chunk
            if len(body) > BODY_LIMIT:
                raise _Failed("wrong answer", f"GET {path} answered over {BODY_LIMIT >> 20} MiB: not an SGLang "
                              "server", response.status)
            if time.monotonic() > deadline:  # a server that trickles its answer
                raise TimeoutError
        return response.status, (response.getheader("Content-Type") or "no content type").split(";")[0], bytes(body)
    except _Failed:
        raise
    except TimeoutError:
        raise _Failed("timed out", f"no answer to GET {path} within {timeout:g} s") from None
    except ConnectionRefusedError:
        raise _Failed("refused", f"nothing listens on port {port} of {host}") from None
    except socket.gaierror as exc:
        raise _Failed("unreachable", f"cannot resolve the host {host!r} ({exc.strerror})") from None
    except (http.client.HTTPException, ConnectionResetError, BrokenPipeError):
        raise _Failed("wrong answer", f"GET {path}: the connection closed without an HTTP answer (not an HTTP "
                      "server)") from None
    except OSError as exc:  # no route to the host, the network is down
        raise _Failed("unreachable", f"cannot connect to {host}: {exc.strerror or exc}") from None
    finally:
        conn.close()


def _server_info(status: int, kind: str, body: bytes, path: str) -> Mapping[str, object]:
    """The JSON object an SGLang /server_info answers (its ServerArgs as a dict: model_path always), or _Failed."""
    if status in (401, 403):
        raise _Failed("wrong answer", f"HTTP {status} to GET {path}: the engine wants an API key (sglang --api-key) "
                      "and slime sends none", status)
    if status != 200:
        raise _Failed("wrong answer", f"HTTP {status} {kind} to GET {path}", status)
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Failed("wrong answer", f"GET {path} answered HTTP 200 but not JSON ({kind})", status) from None
    if not isinstance(data, dict) or "model_path" not in data:
        raise _Failed("wrong answer", f"GET {path} answered JSON without model_path: not an SGLang server's server "
                      "info", status)
    return data


def probe(addr: str, v030: bool, timeout: float) -> Probe:
    """Ask ``addr`` as slime does, within ``timeout`` seconds in all.

    From fa3c990 on: GET /server_info, then GET /get_server_info when the first does not answer JSON (not when
    nothing answers at all: the second would not either). v0.3.0: GET /health_generate must answer 200, then GET
    /get_server_info."""
    url = base_url(addr)
    if url is None:
        return Probe(addr, "invalid", "not host:port or http://host:port: slime refuses it (ACRL-R001)")
    parsed = urlparse(url)
    host, port = str(parsed.hostname), int(parsed.port or 0)
    deadline = time.monotonic() + timeout
    try:
        if v030:
            status, kind, _ = _get(host, port, "/health_generate", deadline, timeout)
            if status == 503:
                return Probe(addr, "not ready", "HTTP 503 to GET /health_generate: the engine is starting or "
                             "unhealthy", status=status)
            if status != 200:
                raise _Failed("wrong answer", f"HTTP {status} {kind} to GET /health_generate", status)
            return Probe(addr, "answered", "", _server_info(*_get(host, port, "/get_server_info", deadline, timeout),
                                                               "/get_server_info"))
        try:
            return Probe(addr, "answered", "", _server_info(*_get(host, port, "/server_info", deadline, timeout),
                                                               "/server_info"))
        except _Failed as first:
            if first.kind != "wrong answer":
                raise
            try:  # older sglang has only /get_server_info (external.py:76 at 624b824 tries both)
                answer = _server_info(*_get(host, port, "/get_server_info", deadline, timeout), "/get_server_info")
            except _Failed as second:
                if second.kind != "wrong answer":
                    raise
                detail = first.detail if first.detail.endswith("sends none") else \
                    f"not an SGLang server: {first.detail}, {second.detail}"
                raise _Failed("wrong answer", detail, first.status) from None
            return Probe(addr, "answered", "via /get_server_info", answer)
    except _Failed as failed:
        return Probe(addr, failed.kind, failed.detail, None, failed.status)
