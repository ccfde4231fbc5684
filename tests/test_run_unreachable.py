"""`acrl run` against a Ray cluster it cannot use: a real closed port on 127.0.0.1, and a web server that answers
but is not Ray's dashboard. The terminal gets one line with the address (never its user:password) and the fix; Ray's
whole traceback stays in train.log. The preflight's final hint names every check that failed."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pty_term import Terminal
from test_run import NO_AWS, free_port, make_project, only_record, tool_env

from acrl.runtime._stream import DetailFilter

ACRL = str(Path(sys.executable).parent / "acrl")


def acrl_run(bundle: Path, runs: Path, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """The real console script, as a person runs it (the AWS checks skipped: this machine has no account)."""
    return subprocess.run([ACRL, "run", str(bundle), "--runs-dir", str(runs), *NO_AWS, *args], capture_output=True,
                          text=True, env=env or tool_env(), timeout=300)


def train_log(runs: Path) -> str:
    (log,) = runs.glob("*/*/train.log")
    return log.read_text()


@pytest.mark.slow
def test_a_closed_port_is_one_line_with_the_address_and_a_fix(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    address = f"http://127.0.0.1:{free_port()}"  # bound, then closed: nothing listens there
    proc = acrl_run(project.bundle, project.runs, "--address", address)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 1, shown
    lines = [line for line in shown.splitlines() if "cannot reach the Ray cluster" in line]
    assert lines == [f"acrl: error: cannot reach the Ray cluster at {address} (ConnectionError: Failed to connect "
                     f"to Ray at address: {address}.); nothing was submitted; fix: start it, or set ACRL_RAY_ADDRESS "
                     "(acrl run --address, [cluster] address) to its dashboard, http://HEAD:8265"]
    assert "Traceback" not in shown and "acrl-detail" not in shown and len(shown.splitlines()) < 60
    record = only_record(project.runs)
    log = train_log(project.runs)
    assert f"Ray's whole output is in {project.runs / 'test-exp' / record['run_id'] / 'train.log'}" in shown
    assert "acrl-detail: begin ray job submit\nTraceback (most recent call last):" in log  # the whole of it
    assert log.count("\n") > 60 and lines[0] in log
    assert record["status"] == "failed" and record["exit_status"] == 1


@pytest.mark.slow
def test_the_password_of_an_address_is_in_no_line_log_or_record(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (tmp_path / "train.jsonl").unlink()  # the record's entry for a dataset not readable here names the cluster
    port = free_port()
    proc = acrl_run(project.bundle, project.runs, "--skip", "datasets",
                    env=tool_env(ACRL_RAY_ADDRESS=f"http://alice:hunter2@127.0.0.1:{port}"))
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 1, shown
    assert f"acrl: error: cannot reach the Ray cluster at http://***@127.0.0.1:{port} (" in shown
    (record,) = project.runs.glob("*/*/run.json")
    assert f"(the job runs on http://127.0.0.1:{port})" in record.read_text()
    for text in (shown, train_log(project.runs), record.read_text()):
        assert "hunter2" not in text and "alice" not in text


class _NotRay(http.server.BaseHTTPRequestHandler):
    """Answers ``status`` to every GET (http.server's method names), and logs nothing."""

    status = 404

    def do_GET(self) -> None:
        self.send_error(self.status)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(params=[404, 401])
def web_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    """A web server on 127.0.0.1 that answers 404 to everything (a port that is not the dashboard's), or 401 (a
    proxy or dashboard that wants credentials)."""
    handler = type("Answers", (_NotRay,), {"status": request.param})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", request.param
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_a_server_that_is_not_rays_dashboard_or_refuses_is_named_with_the_fix(tmp_path: Path,
                                                                              web_server: tuple[str, int]) -> None:
    address, status = web_server
    project = make_project(tmp_path)
    proc = acrl_run(project.bundle, project.runs, "--address", address)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 1, shown
    (line,) = [line for line in shown.splitlines() if line.startswith("acrl: error:")]
    if status == 401:  # Ray's AuthenticationError (with its advice on tokens)
        assert line == (f"acrl: error: {address} refused the request: it wants credentials; nothing was submitted; "
                        "fix: export ACRL_RAY_ADDRESS with the user:password of a proxy in front of the dashboard "
                        "(read -rs ACRL_RAY_ADDRESS; export ACRL_RAY_ADDRESS), or Ray's token (RAY_AUTH_TOKEN, Ray's "
                        "token authentication)")
    else:
        assert line.startswith(f"acrl: error: {address} answers but is not a Ray dashboard with the Jobs API "
                               "(RuntimeError: Version check returned 404.")
        assert line.endswith("fix: set ACRL_RAY_ADDRESS (acrl run --address, [cluster] address) to the dashboard's "
                             "address, http://HEAD:8265 (Ray 1.9 or later)")
    assert "Traceback" not in shown and "Traceback (most recent call last)" in train_log(project.runs)


def test_the_preflight_hint_names_every_failed_check(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (tmp_path / "train.jsonl").unlink()
    (tmp_path / "model" / "config.json").unlink()
    (tmp_path / "model").rmdir()
    proc = acrl_run(project.bundle, project.runs, "--dry-run")
    assert proc.returncode == 1
    failed = [line.split()[0] for line in proc.stdout.splitlines() if line.split()[1:2] == ["failed"]]
    assert len(failed) >= 2 and {"model", "datasets"} <= set(failed)
    assert proc.stderr.splitlines()[-1] == ("  fix: fix what the table says, or skip them: " +
                                            " ".join(f"--skip {name}" for name in failed))
    assert not project.runs.exists()


def test_the_terminal_gets_everything_but_the_detail_blocks_however_the_output_is_cut() -> None:
    text = (b"acrl: submitting\nacrl-detail: begin ray job submit\nTraceback (most recent call last):\n  File x\n"
            b"ConnectionError: no\nacrl-detail: end\nacrl: error: one line\nnot acrl-detail: begin at the start\n"
            b"acrl-detail: begin\nunterminated block at the end")
    shown = b"acrl: submitting\nacrl: error: one line\nnot acrl-detail: begin at the start\n"
    for size in (1, 2, 3, 7, 18, 19, 64, len(text)):
        cut = DetailFilter()
        out = b"".join(cut.feed(text[i:i + size]) for i in range(0, len(text), size))
        assert out == shown and cut.blocks == 2, size
    partial = DetailFilter()  # a line's start that may become a marker is held back only until it cannot
    assert partial.feed(b"acrl-det") == b"" and partial.feed(b"ached\n") == b"acrl-detached\n"
    assert partial.feed(b"progress 10%") == b"progress 10%"  # any other partial line goes out at once


@pytest.mark.slow
def test_bash_train_sh_on_a_terminal_prints_the_one_line_only(tmp_path: Path) -> None:
    """train.sh run by hand: on a terminal the detail is not printed at all (nothing would keep it off)."""
    project = make_project(tmp_path)
    address = f"http://127.0.0.1:{free_port()}"
    term = Terminal(["bash", str(project.bundle / "train.sh")], env=tool_env(ACRL_RAY_ADDRESS=address), cwd=tmp_path)
    assert term.finish() == 1
    assert f"acrl: error: cannot reach the Ray cluster at {address} (" in term.text
    assert "Traceback" not in term.text and "acrl-detail" not in term.text
