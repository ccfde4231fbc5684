"""The ``external-engines`` preflight check: every external SGLang engine the bundle hands slime
(``--rollout-external-engine-addrs``: ``[rollout] external_engine_addrs``) answers what slime asks it first, from
this machine, before any cluster starts.

What slime asks first, at each commit acrl has facts for:

- fa3c990, v0.3.1, 624b824: ``parse_args`` itself (slime_validate_args, slime/utils/arguments.py:1904-1907 at
  624b824, 1881-1884 at fa3c990, 1842-1845 at v0.3.1) calls discover_external_engines, which asks each address
  ``GET /server_info``, then ``GET /get_server_info`` if that fails, 30 s each, one address after the other, and
  stops with a RuntimeError when neither answers JSON (slime/backends/sglang_utils/external.py:74-83 and 95-101 at
  624b824). It reads the engine's GPUs and worker type from the answer, and each engine's start later asks it again
  and asserts the fields it compares (sglang_engine.py:157-169, the fields 527-573 less 622-642).
- v0.3.0 (``--rollout-external``): nothing at parse time; each engine actor's start asks ``GET /health_generate``
  every 2 s, with no timeout and no end, until it answers 200 (sglang_engine.py:79-97 and 186-190 at v0.3.0: a
  stopped server hangs the run), then ``GET /get_server_info`` (no timeout) and asserts the same fields plus host,
  port and the parallel sizes (sglang_engine.py:169-191, 563-660).

This check asks the same, with a short timeout per address (``ACRL_ENGINE_TIMEOUT`` seconds, default 5), all
addresses at once, and reports each: answered (the model it serves, its sglang and GPUs), refused, timed out,
unreachable, not an SGLang server, or answering with a field slime's engine start asserts otherwise. The addresses
come from the argv train.sh submits (as the slime-parser check reads it), not from the spec. Only the standard
library; nothing of the answer but the fields named here reaches a message (it holds the engine's api_key).
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from acrl.compiler import without_credentials

from .engine_probe import Probe, probe
from .outcome import CheckFailed, CheckSkipped
from .python import entrypoint_argv

if TYPE_CHECKING:
    from .bundle_info import BundleInfo

ADDRS_FLAG = "--rollout-external-engine-addrs"
SWITCH_FLAG = "--rollout-external"  # v0.3.0 only (arguments.py:509-514 at v0.3.0)
TIMEOUT_ENV = "ACRL_ENGINE_TIMEOUT"
DEFAULT_TIMEOUT_S = 5.0
# slime does not contact the engines with these (arguments.py:1897-1907 at 624b824: debug_train_only)
TRAIN_ONLY_FLAGS = ("--debug-train-only", "--load-debug-rollout-data")


def flag_values(flags: Sequence[str], flag: str) -> list[str] | None:
    """The values of the last ``flag`` (argparse's ``nargs="+"``: the tokens up to the next option), or None."""
    found: list[str] | None = None
    for i, token in enumerate(flags):
        if token == flag:
            found = []
            for value in flags[i + 1:]:
                if value.startswith("-"):
                    break
                found.append(value)
        elif token.startswith(flag + "="):
            found = [token.partition("=")[2]]
    return found


def expected_offload_rollout(flags: Sequence[str]) -> tuple[bool, str]:
    """slime's ``args.offload_rollout`` for these flags, and the flag that decides it: what each engine's start
    expects as the engine's ``enable_memory_saver`` (sglang_engine.py:532 at 624b824). slime_validate_args: --offload
    sets it, --debug-rollout-only clears it, --colocate sets it unless --no-offload-rollout (always with
    --release-train), otherwise False (arguments.py:1913-1959 at 624b824; 1891-1929 at fa3c990, 1852-1895 at
    v0.3.1, 1794-1831 at v0.3.0)."""
    value: bool | None = None
    why = ""
    for token in flags:
        if token in ("--offload-rollout", "--no-offload-rollout"):
            value, why = token == "--offload-rollout", token
    if "--offload" in flags:
        value, why = True, "--offload"
    if "--debug-rollout-only" in flags:
        return False, "--debug-rollout-only"
    if "--colocate" in flags and "--release-train" in flags:
        return True, "--colocate with --release-train"
    if "--colocate" in flags and value is None:
        return True, "--colocate"
    return (False, "slime's default") if value is None else (value, why)


def expectations(flags: Sequence[str]) -> dict[str, tuple[object, str, str]]:
    """The fields each engine's start asserts that follow from the argv alone: name -> (value, why, how to start
    the engine with it). sglang_engine.py:532, 568-573 at 624b824 (the same at the other commits)."""
    offload, why = expected_offload_rollout(flags)
    how = "with --enable-memory-saver" if offload else "without --enable-memory-saver"
    if why == "--colocate":  # colocated weight sync is UpdateWeightFromTensor (actor.py:168-169 at 624b824)
        how += (", or set [cluster] colocate = false (colocated weight sync hands over CUDA IPC handles, which only "
                "an engine on the actors' own GPUs can open)")
    out: dict[str, tuple[object, str, str]] = {"enable_memory_saver": (offload, why, how)}
    if "--use-rollout-routing-replay" in flags:
        out["enable_return_routed_experts"] = (True, "--use-rollout-routing-replay", "with --enable-return-routed-"
                                               "experts")
    if "--fp16" in flags:
        out["dtype"] = ("float16", "--fp16", "with --dtype float16 (slime compares the word: not half)")
    return out


def mismatches(answer: Mapping[str, object], expected: Mapping[str, tuple[object, str, str]], addr: str,
               v030: bool) -> list[tuple[str, str]]:
    """(what differs, how to start the engine) for each field slime's engine start would assert on this answer."""
    wanted = dict(expected)
    if answer.get("disaggregation_mode") == "prefill" and not v030:  # sglang_engine.py:556-558 at 624b824
        wanted["load_balance_method"] = ("follow_bootstrap_room", "a prefill engine",
                                         "with --load-balance-method follow_bootstrap_room")
    if v030:  # v0.3.0 compares host and port too: the address's (rollout.py:848-856, sglang_engine.py:650-660)
        host, _, port = addr.partition(":")  # host:port only at v0.3.0 (ACRL-R001): slime's addr.split(":")
        wanted["host"] = (host, "the address", f"with --host {host} (exactly as written in the address)")
        wanted["port"] = (int(port) if port.isdigit() else port, "the address", f"with --port {port}")
    return [(f"{name} is {answer.get(name)!r}, slime expects {value!r} ({why})", how)
            for name, (value, why, how) in wanted.items() if answer.get(name) != value]


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_of(url: str) -> str | None:
    try:
        return urlparse(url if "://" in url else f"http://{url}").hostname
    except ValueError:
        return None


def remote_cluster(info: BundleInfo) -> str | None:
    """The address of the existing cluster the job runs on, when it is not this machine (its host is not a
    loopback one), as messages and records show it (without a user:password); None for a local head."""
    address = info.cluster_address
    return without_credentials(address) if address and not _is_loopback(_host_of(address)) else None


def timeout_s() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 600:
        raise CheckFailed(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds", f"set {TIMEOUT_ENV} to e.g. 5, or unset "
                          "it")
    return value


def probe_all(addrs: Sequence[str], v030: bool, timeout: float) -> list[Probe]:
    """Probe every address at once, each within ``timeout`` seconds; a probe still running a second after that
    (a name lookup the socket timeout does not bound) is reported as timed out and left behind (a daemon thread)."""
    found: dict[int, Probe] = {}

    def run(i: int, addr: str) -> None:
        try:
            found[i] = probe(addr, v030, timeout)
        except Exception as exc:  # e.g. a host name IDNA cannot encode: said, not mistaken for a timeout
            found[i] = Probe(addr, "unreachable", f"cannot connect: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(i, a), daemon=True, name=f"acrl-engine-{i}")
               for i, a in enumerate(addrs)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + 1.0
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [found.get(i) or Probe(a, "timed out", f"no answer within {timeout:g} s (the name lookup or connection "
                                  "did not finish)") for i, a in enumerate(addrs)]


def check_external_engines(info: BundleInfo) -> str:
    try:
        script = (info.path / "train.sh").read_bytes()
    except OSError as exc:
        raise CheckFailed(f"cannot read train.sh: {exc.strerror or exc}", "compile the bundle again") from None
    if ADDRS_FLAG.encode() not in script:  # no need to run train.sh for the argv of a bundle without them
        raise CheckSkipped("the bundle names no external engines ([rollout] external_engine_addrs)")
    flags = entrypoint_argv(info)[2:]
    addrs = flag_values(flags, ADDRS_FLAG)
    if not addrs:
        raise CheckSkipped(f"the argv train.sh submits has no {ADDRS_FLAG}")
    key = "[rollout] external_engine_addrs" if info.get("rollout.external_engine_addrs") else \
        f"[extra.flags] {ADDRS_FLAG}" if ADDRS_FLAG in (info.get("extra.flags") or {}) else "[extra] args"
    train_only = [f for f in TRAIN_ONLY_FLAGS if f in flags or any(t.startswith(f + "=") for t in flags)]
    if train_only:
        raise CheckSkipped(f"{train_only[0]}: slime trains only and does not contact the engines")
    v030 = SWITCH_FLAG in flags
    remote = remote_cluster(info)
    # an engine on the loopback of a remote cluster's node is not this machine's: it cannot be asked from here
    asked = [a for a in addrs if not (remote and _is_loopback(_host_of(a)))]
    if not asked:
        raise CheckSkipped(f"the engines are on the loopback of the cluster at {remote}'s node, not asked from here")
    limit = timeout_s()
    probes = probe_all(asked, v030, limit)
    expected = expectations(flags)
    hf = flag_values(flags, "--hf-checkpoint")
    checkpoint = hf[0].rstrip("/") if hf else None
    return _judge(probes, expected, key, v030, remote, checkpoint, info.sglang_version, len(addrs) - len(asked))


_FIXES = {
    # sglang.launch_server listens on 127.0.0.1 unless --host says otherwise (server_args.py:977 in 0.5.15.post1)
    "refused": "start SGLang at each refused address, listening where this machine reaches it (python -m "
               "sglang.launch_server --host 0.0.0.0 --port PORT ...: its default host is 127.0.0.1), or correct the "
               "port",
    "timed out": "check that this machine reaches the host (a firewall, a security group) and the server is not "
                 "stuck",
    "unreachable": "correct the host name",
    "wrong answer": "give the SGLang server's own HTTP port (sglang.launch_server --port), not another service's",
    "not ready": "wait until the engine has loaded its model (it answers 503 while it starts), or restart it",
    "invalid": "write each address as host:port or http://host:port",
}

# v0.3.0 compares the engine's --host with the address's host (see mismatches): 0.0.0.0 would not do
_V030_REFUSED = ("start SGLang at each refused address with --host and --port exactly as written in it (slime v0.3.0 "
                 "compares them), or correct the port")


def _judge(probes: Sequence[Probe], expected: Mapping[str, tuple[object, str, str]], key: str, v030: bool,
           remote: str | None, checkpoint: str | None, sglang: str | None, not_asked: int) -> str:
    asked = "GET /health_generate, then GET /get_server_info" if v030 else "GET /server_info"
    problems: list[str] = []
    fixes: list[str] = []
    restarts: dict[str, list[str]] = {}  # how to start the engine -> the addresses to restart so
    answered: list[Probe] = []
    for p in probes:
        if p.kind != "answered" or p.answer is None:
            problems.append(f"{p.addr}: {p.kind} ({p.detail})")
            fix = "start the engine without --api-key (slime sends no key)" if p.status in (401, 403) else \
                _V030_REFUSED if v030 and p.kind == "refused" else _FIXES[p.kind]
            fixes += [fix] if fix not in fixes else []
            continue
        wrong = mismatches(p.answer, expected, p.addr, v030)
        if wrong:
            problems.append(f"{p.addr}: answers, but " + "; ".join(what for what, _ in wrong))
            for _, how in wrong:
                restarts.setdefault(how, []).append(p.addr)
        else:
            answered.append(p)
    where = f"; asked from this machine, the job runs on the cluster at {remote}" if remote else ""
    skipped = f"; {not_asked} on the cluster node's loopback not asked" if not_asked else ""
    if problems:
        why = ("slime v0.3.0 asks each engine GET /health_generate until it answers 200, without end, then GET "
               "/get_server_info" if v030 else
               "slime's parse_args asks GET /server_info, then GET /get_server_info, and raises RuntimeError when "
               "neither answers JSON")
        why += "; each engine's start asserts the fields named" if restarts else ""
        ok = f"; answered: {', '.join(p.addr for p in answered)}" if answered else ""
        fixes += [f"restart {', '.join(addrs)} {how}" for how, addrs in restarts.items()]
        hint = "; ".join(fixes) + (f"; or correct {key} and compile again" if len(fixes) > len(restarts) else "")
        if remote:
            hint += "; if the engines are reachable only from the cluster, --skip external-engines"
        raise CheckFailed(f"{key}: {len(problems)} of {len(probes)} engines would stop the run: "
                          + " | ".join(problems) + ok + skipped + f" ({why}{where})", hint)
    return f"{len(probes)} engines answer {asked}{where}: " + "; ".join(_served(p) for p in answered) + \
        _notes(answered, checkpoint, sglang) + skipped


def _served(p: Probe) -> str:
    """``ADDR: MODEL (sglang V, WORKER, N GPUs)``: the engine's worker type and GPUs as slime reads them
    (external.py:86-92 and 103-105 at 624b824)."""
    answer = p.answer or {}
    version = answer.get("version")
    tp = _int(answer.get("tp_size")) or _int(answer.get("tensor_parallel_size")) or 1
    pp = _int(answer.get("pp_size")) or _int(answer.get("pipeline_parallel_size")) or 1
    gpus = _int(answer.get("num_gpus")) or _int(answer.get("num_gpus_per_engine")) or tp * pp
    mode = answer.get("disaggregation_mode")
    worker = "encoder" if answer.get("encoder_only") else mode if mode in ("prefill", "decode") else "regular"
    return (f"{p.addr}: {answer.get('model_path')} (sglang {version if isinstance(version, str) else '?'}, "
            f"{worker}, {gpus} GPU{'s' if gpus != 1 else ''})")


def _notes(answered: Sequence[Probe], checkpoint: str | None, sglang: str | None) -> str:
    """What the engines serve that differs from the bundle, once. slime compares neither: model_path is in
    _EXTERNAL_ENGINE_SKIP_CHECK_FIELDS (sglang_engine.py:622-623 at 624b824), but it loads the actor's weights into
    the engines at every update, so they must serve the same architecture."""
    models = sorted({str((p.answer or {}).get("model_path")).rstrip("/") for p in answered} - {checkpoint or ""})
    versions = sorted({v for p in answered if isinstance(v := (p.answer or {}).get("version"), str)} - {sglang or ""})
    notes = []
    if checkpoint is not None and models:
        notes.append(f"note: {', '.join(models)} is not the bundle's --hf-checkpoint {checkpoint} (slime does not "
                     "compare them, but loads the actor's weights into the engines: the same architecture is needed)")
    if sglang and versions:
        notes.append(f"note: the bundle's slime runs sglang {sglang}, the engines {', '.join(versions)}")
    return "".join(f"; {n}" for n in notes)


def _int(value: object) -> int:
    try:
        return int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else 0
    except ValueError:
        return 0
