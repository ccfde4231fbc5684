"""The external-engines preflight check (runtime/_preflight/engines.py) against real HTTP servers on 127.0.0.1
started here: a stand-in SGLang engine (http.server in a thread, answering as sglang 0.5.15.post1's
sglang/srt/entrypoints/http_server.py does: /server_info and its deprecated alias /get_server_info at 695-724,
/health and /health_generate at 578-653, FastAPI's JSON 404 elsewhere, 401 without the key when started with
--api-key: sglang/srt/utils/auth.py:93-100), a closed port, a server that never answers and a web server that
answers 404 in HTML. Through the real `acrl run` entry (--dry-run), on bundles compiled from the test's spec; no
address but 127.0.0.1 is ever contacted."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from test_run import Project, acrl, free_port, make_project, tool_env

from acrl.compiler import compile_spec, write
from acrl.compiler._pipeline.validate import flags as validate_flags
from acrl.runtime._preflight import engines
from acrl.runtime._preflight.bundle_info import read_bundle_info
from acrl.runtime._preflight.checks import CHECKS, Check, run_check
from conftest import merge

V030 = "bf14dc21f9500746447f2572d0692e981c4d2a7e"
SECRET = "sk-engine-secret-0042"  # the engine's --api-key: its /server_info answers it in plain text


class StandInEngine:
    """An SGLang HTTP server as slime sees it, on 127.0.0.1: the endpoints slime asks, recording each request."""

    def __init__(self, *, model: str = "/models/Qwen2.5-3B-Instruct", routes: tuple[str, ...] = (
            "/server_info", "/get_server_info"), health: int = 200, api_key: str | None = None,
                 html: bool = False, **fields: Any) -> None:
        self.requests: list[tuple[str, str]] = []
        self.routes, self.health, self.api_key, self.html = routes, health, api_key, html
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = int(self.server.server_address[1])
        self.addr = f"127.0.0.1:{self.port}"
        # dataclasses.asdict(server_args) (a few of its fields) + scheduler_info + internal_states + version
        self.info: dict[str, Any] = {
            "model_path": model, "tokenizer_path": model, "host": "127.0.0.1", "port": self.port, "tp_size": 1,
            "pp_size": 1, "dp_size": 1, "ep_size": 1, "dtype": "auto", "enable_memory_saver": True,
            "disaggregation_mode": "null", "disaggregation_bootstrap_port": 8998, "encoder_only": False,
            "load_balance_method": "round_robin", "enable_return_routed_experts": False, "api_key": api_key,
            "mem_fraction_static": 0.8, "max_total_num_tokens": 400000, "internal_states": [{"last_gen_throughput": 0}],
            "version": "0.5.15.post1", "kv_events": None, **fields}
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                engine.requests.append(("GET", self.path))
                if engine.html:
                    self.answer(404, b"<html><body><h1>404 Not Found</h1></body></html>", "text/html")
                elif self.path.startswith("/health"):
                    self.answer(engine.health, b"", "text/plain")
                elif engine.api_key and self.headers.get("Authorization") != f"Bearer {engine.api_key}":
                    self.answer(401, b'{"error": "Unauthorized"}')
                elif self.path in engine.routes:
                    self.answer(200, json.dumps(engine.info).encode())
                else:
                    self.answer(404, b'{"detail":"Not Found"}')

            def answer(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def engines_up(*standins: StandInEngine) -> Iterator[tuple[StandInEngine, ...]]:
    try:
        yield standins
    finally:
        for engine in standins:
            engine.close()


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A port that takes connections (the kernel's backlog) and never answers a byte."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


def compile_engines(project: Project, addrs: list[str], **tables: Any) -> None:
    """Compile the project's spec again with these external engine addresses (and other tables) into its bundle."""
    spec = merge(merge(project.spec, {"rollout": {"external_engine_addrs": addrs or None}}), tables)
    (project.root / "spec.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    write(compile_spec(project.root / "spec.toml"), project.bundle, force=True)


def run_row(project: Project, *extra: str, timeout: str = "0.5") -> tuple[int, str, str, str]:
    """`acrl run BUNDLE --dry-run`: (exit status, the external-engines row's status, its detail, its fix)."""
    proc = acrl("run", str(project.bundle), "--dry-run", "--skip", "gpus", *extra,
                env=tool_env(**{engines.TIMEOUT_ENV: timeout}))
    row = re.search(r"^external-engines +(\w+) +(\d+)ms +(.*)\n(?: +fix: (.*))?", proc.stdout, re.M)
    assert row is not None, proc.stdout + proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    return proc.returncode, row.group(1), row.group(3), row.group(4) or ""


def problems(detail: str) -> list[tuple[str, str]]:
    """(address, kind) of each engine the failed check names, in the addresses' order."""
    body = detail.split(" engines would stop the run: ", 1)[1]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"(?:^| \| )(\S+): (refused|timed out|unreachable|not "
                                                            r"ready|wrong answer|invalid|answers, but)", body)]


def test_each_address_is_asked_what_slime_asks_and_reported_by_what_it_did(tmp_path: Path) -> None:
    """fa3c990 on: GET /server_info, then /get_server_info where the first is no JSON (slime/backends/sglang_utils/
    external.py:74-83 at 624b824); all addresses at once, each within ACRL_ENGINE_TIMEOUT."""
    project = make_project(tmp_path)
    with engines_up(StandInEngine(), StandInEngine(html=True), StandInEngine(api_key=SECRET)) as (good, html, keyed), \
            silent_port() as silent:
        closed = free_port()
        addrs = [good.addr, f"127.0.0.1:{closed}", f"http://127.0.0.1:{silent}/", html.addr, keyed.addr]
        compile_engines(project, addrs)
        started = time.monotonic()
        code, status, detail, fix = run_row(project)
        elapsed = time.monotonic() - started
    assert code == 1 and status == "failed"
    assert detail.startswith("[rollout] external_engine_addrs: 4 of 5 engines would stop the run: ")
    assert problems(detail) == [(addrs[1], "refused"), (addrs[2], "timed out"), (addrs[3], "wrong answer"),
                                (addrs[4], "wrong answer")]
    assert f"; answered: {good.addr} (" in detail
    assert good.requests == [("GET", "/server_info")]  # what slime's parse_args asks first, nothing more
    assert html.requests == [("GET", "/server_info"), ("GET", "/get_server_info")]  # slime's fallback, as slime
    assert "not an SGLang server: HTTP 404 text/html to GET /server_info, HTTP 404 text/html to GET " \
           "/get_server_info" in detail
    assert "HTTP 401 to GET /server_info: the engine wants an API key" in detail
    assert "no answer to GET /server_info within 0.5 s" in detail and f"nothing listens on port {closed}" in detail
    # one fix per kind, naming the key
    assert fix.startswith("start SGLang at each refused address") and "start the engine without --api-key" in fix
    assert fix.endswith("or correct [rollout] external_engine_addrs and compile again")
    assert elapsed < 60  # the silent one costs 0.5 s here, where slime waits 30 s per endpoint


def test_engines_that_answer_pass_with_what_they_serve(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    model = project.spec["model"]["dir"]
    with engines_up(StandInEngine(model=model), StandInEngine(routes=("/get_server_info",), tp_size=2)) as (a, old):
        compile_engines(project, [a.addr, f"http://{old.addr}"])
        code, status, detail, _ = run_row(project)
    assert (code, status) == (0, "passed"), detail
    # an older sglang's /get_server_info only; tp 2 is 2 GPUs (external.py:103-105); the other model is noted once
    assert detail == (f"2 engines answer GET /server_info: {a.addr}: {model} (sglang 0.5.15.post1, regular, 1 GPU); "
                      f"http://{old.addr}: /models/Qwen2.5-3B-Instruct (sglang 0.5.15.post1, regular, 2 GPUs); "
                      f"note: /models/Qwen2.5-3B-Instruct is not the bundle's --hf-checkpoint {model} (slime does not "
                      "compare them, but loads the actor's weights into the engines: the same architecture is "
                      "needed); note: the bundle's slime runs sglang 0.5.13, the engines 0.5.15.post1")
    assert old.requests == [("GET", "/server_info"), ("GET", "/get_server_info")]


def test_a_field_slimes_engine_start_asserts_fails_the_check(tmp_path: Path) -> None:
    """--colocate makes slime's offload_rollout true (arguments.py:1939-1950 at 624b824), and each engine's start
    asserts enable_memory_saver equals it (sglang_engine.py:532 and 160-169); a colocate = false bundle expects
    false."""
    project = make_project(tmp_path)
    with engines_up(StandInEngine(enable_memory_saver=False)) as (engine,):
        compile_engines(project, [engine.addr])
        code, status, detail, fix = run_row(project)
        assert (code, status) == (1, "failed")
        assert problems(detail) == [(engine.addr, "answers, but")]
        assert "enable_memory_saver is False, slime expects True (--colocate)" in detail
        assert fix.startswith(f"restart {engine.addr} with --enable-memory-saver, or set [cluster] colocate = false")
        assert "external_engine_addrs" not in fix  # the addresses are right
        compile_engines(project, [engine.addr], cluster={"colocate": False, "gpus_per_node": 2})
        code, status, detail, _ = run_row(project)
        assert (code, status) == (0, "passed"), detail


def test_v030_asks_health_generate_then_get_server_info_and_compares_host_and_port(tmp_path: Path) -> None:
    """v0.3.0 (--rollout-external): each engine actor waits for GET /health_generate = 200 without end, then asks
    GET /get_server_info and asserts host and port too (sglang_engine.py:79-97, 169-191 at v0.3.0)."""
    project = make_project(tmp_path)
    with engines_up(StandInEngine(), StandInEngine(health=503), StandInEngine(host="0.0.0.0")) as (ok, busy, wild):
        for engine, kind in ((ok, None), (busy, "not ready"), (wild, "answers, but")):
            compile_engines(project, [engine.addr], slime={"commit": V030}, rollout={"external": True})
            code, status, detail, fix = run_row(project)
            if kind is None:
                assert (code, status) == (0, "passed"), detail
                assert detail.startswith("1 engines answer GET /health_generate, then GET /get_server_info: ")
            else:
                assert (code, status) == (1, "failed") and problems(detail) == [(engine.addr, kind)], detail
    assert ok.requests == [("GET", "/health_generate"), ("GET", "/get_server_info")]
    assert busy.requests == [("GET", "/health_generate")]
    assert "host is '0.0.0.0', slime expects '127.0.0.1' (the address)" in detail
    assert fix.startswith(f"restart {wild.addr} with --host 127.0.0.1")


def test_no_external_engines_and_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_project(tmp_path)
    code, status, detail, _ = run_row(project)
    assert (code, status, detail) == (0, "skipped", "the bundle names no external engines ([rollout] "
                                                    "external_engine_addrs)")
    compile_engines(project, [f"127.0.0.1:{free_port()}"])
    assert run_row(project)[:2] == (1, "failed")
    assert run_row(project, "--skip", "external-engines")[:3] == (0, "skipped", "--skip")
    # the escape hatch: the message names the key that holds them. ACRL-F002 now refuses the flag there (the key owns
    # it); a bundle compiled before it did is made with F002 finding no owner, and `acrl run` still reads such bundles
    with monkeypatch.context() as patched:
        patched.setattr(validate_flags, "key_of", lambda flag, commit: None)
        compile_engines(project, [], extra={"flags": {"--rollout-external-engine-addrs": f"127.0.0.1:{free_port()}"}})
    code, status, detail, _ = run_row(project)
    assert (code, status) == (1, "failed")
    assert detail.startswith("[extra.flags] --rollout-external-engine-addrs: 1 of 1 engines would stop the run: ")


# --- the parts, without the CLI ---------------------------------------------------------------------

def test_the_probes_run_at_once_each_within_its_timeout() -> None:
    with contextlib.ExitStack() as stack:
        ports = [stack.enter_context(silent_port()) for _ in range(4)]
        started = time.monotonic()
        found = engines.probe_all([f"127.0.0.1:{p}" for p in ports], False, 0.5)
        elapsed = time.monotonic() - started
    assert [p.kind for p in found] == ["timed out"] * 4
    assert {p.detail for p in found} == {"no answer to GET /server_info within 0.5 s"}  # each its own, none cut off
    assert elapsed < 1.9  # one after the other would be 2 s


@pytest.mark.parametrize(("flags", "expected"), [
    ([], (False, "slime's default")),
    (["--colocate"], (True, "--colocate")),
    (["--colocate", "--no-offload-rollout"], (False, "--no-offload-rollout")),
    (["--colocate", "--no-offload-rollout", "--release-train"], (True, "--colocate with --release-train")),
    (["--offload"], (True, "--offload")),
    (["--offload-rollout", "--no-offload-rollout"], (False, "--no-offload-rollout")),  # argparse: the last wins
    (["--colocate", "--offload", "--debug-rollout-only"], (False, "--debug-rollout-only")),
])
def test_offload_rollout_as_slime_validate_args_derives_it(flags: list[str], expected: tuple[bool, str]) -> None:
    """slime/utils/arguments.py:1913-1959 at 624b824: --offload, then --debug-rollout-only, then --colocate (with
    --release-train always), else False."""
    assert engines.expected_offload_rollout(flags) == expected


def test_the_addresses_are_the_last_flags_values() -> None:
    flags = ["--a", "--rollout-external-engine-addrs", "h:1", "--x", "--rollout-external-engine-addrs", "h:2", "h:3",
             "--y", "1"]
    assert engines.flag_values(flags, "--rollout-external-engine-addrs") == ["h:2", "h:3"]
    assert engines.flag_values(["--rollout-external-engine-addrs=h:4"], "--rollout-external-engine-addrs") == ["h:4"]
    assert engines.flag_values(["--z"], "--rollout-external-engine-addrs") is None


def test_loopback_engines_of_a_remote_cluster_are_not_asked_from_here(tmp_path: Path) -> None:
    """127.0.0.1 of a remote cluster's node is not this machine's: nothing is asked (the cluster's address is a
    reserved name that is never looked up)."""
    project = make_project(tmp_path)
    with engines_up(StandInEngine()) as (engine,):
        compile_engines(project, [engine.addr])
        check = next(c for c in CHECKS if c.name == "external-engines")
        remote = run_check(check, read_bundle_info(project.bundle, address="http://ray-head.invalid:8265"))
        local = run_check(Check("c", check.function), read_bundle_info(project.bundle,
                                                                         address="http://127.0.0.1:8265"))
    assert remote.status == "skipped" and "loopback of the cluster at http://ray-head.invalid:8265" in remote.detail
    assert local.status == "passed" and engine.requests == [("GET", "/server_info")]


def test_a_bad_timeout_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engines.TIMEOUT_ENV, "soon")
    with pytest.raises(engines.CheckFailed, match="ACRL_ENGINE_TIMEOUT='soon' is not a number of seconds"):
        engines.timeout_s()
