"""Record docs/tour.md: acrl's main flows typed into a real terminal, with the output they really print.

    python docs/tour.py            # types each step into a tmux pane and captures it (needs tmux)
    python docs/tour.py --check    # the same steps in a pseudo-terminal; exit 1 if docs/tour.md differs

Each step is sent to a bash in a tmux pane (`tmux send-keys`), and the pane is captured when bash prompts again
(`tmux capture-pane -J`: wrapped lines joined, colour dropped). tests/test_tour.py runs the same steps in a
pseudo-terminal of the same size (no tmux needed) and compares the transcript with docs/tour.md, so the document cannot
drift from what acrl prints. The steps run in a fresh directory with HOME set to it (no cache, no config of the person
recording); its path is written as `~`.
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOC = Path(__file__).resolve().parent / "tour.md"
COLUMNS, LINES = 110, 60
PROMPT = "$ "

# (what the step shows, the command typed). The commands run one after another in one directory. ANSWERS: what is
# typed at a step's questions (a line ending in "]:"), in order.
STEPS: list[tuple[str, str]] = [
    ("Start from a few answers. On a terminal `acrl init` asks for what its flags do not give; it chooses the "
     "parallel sizes by compiling the spec in memory.",
     "acrl init --model qwen3-8B --data /data/train.jsonl --eval gsm8k=/data/gsm8k/test.jsonl --integration slime "
     "-o qwen3-8b-grpo.toml"),
    ("Three typical mistakes while editing it: a model type that is not in the catalog, SlimeRunner's `tp_size` "
     "where acrl says `tensor`, and an eval dataset with no path.",
     "sed -i -e 's/^type = \"qwen3-8B\"/type = \"qwen3-8b-instruct\"/' -e 's/^tensor = 1 /tp_size = 2 /' "
     "-e 's|^gsm8k = \"/data/gsm8k/test.jsonl\"|gsm8k = \"\"|' qwen3-8b-grpo.toml"),
    ("One compile reports all of them, each where it is in the file, with a fix; nothing is written.",
     "acrl-compile qwen3-8b-grpo.toml; echo \"exit $?\""),
    ("Fixed as the messages say, the spec compiles into its bundle.",
     "sed -i -e 's/^type = \"qwen3-8b-instruct\"/type = \"qwen3-8B\"/' -e 's/^tp_size = 2 /tensor = 2 /' "
     "-e 's|^gsm8k = \"\"|gsm8k = \"/data/gsm8k/test.jsonl\"|' qwen3-8b-grpo.toml && acrl-compile qwen3-8b-grpo.toml"),
    ("Edit, recompile: the bundle the spec produced is replaced, and the compile says what changed.",
     "sed -i 's/^lr = 1e-06 /lr = 2e-06 /' qwen3-8b-grpo.toml && acrl-compile qwen3-8b-grpo.toml"),
    ("What a change would do before making it: the semantic diff of the bundle against the spec compiled with "
     "another key.",
     "acrl diff bundles/qwen3-8b-grpo qwen3-8b-grpo.toml --set rollout.batch_size=64"),
    ("Which GPU does what, as slime will place it.",
     "acrl layout qwen3-8b-grpo.toml"),
    ("`acrl run --dry-run` verifies the bundle and runs the preflight checks that apply on this machine (here: no "
     "GPUs, no Ray), then prints the command it would run.",
     "acrl run bundles/qwen3-8b-grpo --dry-run; echo \"exit $?\""),
]

ANSWERS: dict[int, list[str]] = {0: ["8", "1", "/models/Qwen3-8B"]}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")


def _environment(home: Path) -> dict[str, str]:
    keep = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL", "VIRTUAL_ENV") if name in os.environ}
    return {**keep, "HOME": str(home), "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(LINES),
            "PS1": PROMPT, "PROMPT_COMMAND": "", "HISTFILE": "/dev/null"}


def _clean(text: str, home: Path) -> str:
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "")
    text = text.replace(str(home), "~")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def _asks(text: str) -> bool:
    """Whether the terminal's text ends in one of acrl init's questions ("GPUs per node [8]: ")."""
    return text.rstrip().endswith("]:")


def _tmux_capture(tmux: list[str]) -> list[str]:
    pane = subprocess.run([*tmux, "capture-pane", "-t", "tour", "-p", "-J", "-S", "-"], capture_output=True,
                          text=True, check=True).stdout.split("\n")
    lines = [line.rstrip() for line in pane]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _tmux_step(tmux: list[str], command: str, answers: list[str], timeout: float) -> str:
    subprocess.run([*tmux, "send-keys", "-t", "tour", "-R", "clear", "Enter"], check=True)
    time.sleep(0.3)
    subprocess.run([*tmux, "clear-history", "-t", "tour"], check=True)
    subprocess.run([*tmux, "send-keys", "-t", "tour", "-l", command], check=True)
    subprocess.run([*tmux, "send-keys", "-t", "tour", "Enter"], check=True)
    deadline = time.monotonic() + timeout
    pending = list(answers)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        lines = _tmux_capture(tmux)
        if pending and lines and _asks(lines[-1]):
            subprocess.run([*tmux, "send-keys", "-t", "tour", "-l", pending.pop(0)], check=True)
            subprocess.run([*tmux, "send-keys", "-t", "tour", "Enter"], check=True)
            time.sleep(0.3)
            continue
        if len(lines) > 1 and lines[-1] == PROMPT.rstrip():
            return "\n".join(lines[:-1])
    raise SystemExit(f"tour: {command!r} did not finish in {timeout:.0f} s")


def record_tmux(workdir: Path, timeout: float = 120.0) -> list[str]:
    """Each step typed into a tmux pane of COLUMNS x LINES, captured when bash prompts again."""
    if shutil.which("tmux") is None:
        raise SystemExit("tour: tmux is not installed (apt install tmux); --check needs no tmux")
    tmux = ["tmux", "-L", f"acrl-tour-{os.getpid()}", "-f", "/dev/null"]
    env = _environment(workdir.parent)
    subprocess.run([*tmux, "new-session", "-d", "-s", "tour", "-x", str(COLUMNS), "-y", str(LINES), "-c",
                    str(workdir), "env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "--norc",
                    "--noprofile"], check=True)
    try:
        subprocess.run([*tmux, "set-option", "-t", "tour", "history-limit", "10000"], check=True)
        return [_clean(_tmux_step(tmux, command, ANSWERS.get(i, []), timeout), workdir.parent)
                for i, (_, command) in enumerate(STEPS)]
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)


def _pty_step(command: str, answers: list[str], workdir: Path, env: dict[str, str], timeout: float) -> str:
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of the tour's size, then the command in bash
        os.chdir(workdir)
        os.execvpe("bash", ["bash", "--norc", "--noprofile", "-c", f"stty cols {COLUMNS} rows {LINES}; {command}"],
                   env)
    chunks: list[bytes] = []
    answers = list(answers)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
        if answers and _asks(b"".join(chunks).decode("utf-8", "replace")):
            os.write(fd, answers.pop(0).encode() + b"\n")
    else:
        os.kill(pid, 9)
        raise SystemExit(f"tour: {command!r} did not finish in {timeout:.0f} s")
    os.waitpid(pid, 0)
    os.close(fd)
    return PROMPT + command + "\n" + b"".join(chunks).decode("utf-8", "replace")


def record_pty(workdir: Path, timeout: float = 120.0) -> list[str]:
    """The same steps, each in a pseudo-terminal of the same size (what tests/test_tour.py runs)."""
    env = _environment(workdir.parent)
    return [_clean(_pty_step(command, ANSWERS.get(i, []), workdir, env, timeout), workdir.parent)
            for i, (_, command) in enumerate(STEPS)]


def comparable(text: str) -> str:
    """The page with what differs from machine to machine masked: the preflight's timings and the paths of the bash
    and ray executables it found."""
    text = re.sub(r" +\d+ms +", " Nms ", text)  # a wider time widens its right-aligned column
    return re.sub(r"(?m)^((?:bash|ray-cli) +passed Nms )\S+$", r"\1PATH", text)


def render(transcripts: list[str]) -> str:
    parts = ["# A tour of acrl, in a terminal",
             "",
             "Generated by `python docs/tour.py`, which types each command into a tmux pane "
             f"({COLUMNS} columns) and keeps what the pane shows; `tests/test_tour.py` runs the same commands in a "
             "pseudo-terminal and fails when this page differs from what acrl prints. Colour is dropped; the "
             "directory is a fresh one, `~`.",
             ""]
    for (what, _), transcript in zip(STEPS, transcripts, strict=True):
        parts += [what, "", "```console", transcript, "```", ""]
    return "\n".join(parts)


def generate(driver: str) -> str:
    with tempfile.TemporaryDirectory(prefix="acrl-tour-") as home:
        workdir = Path(home, "tour")
        workdir.mkdir()
        transcripts = record_tmux(workdir) if driver == "tmux" else record_pty(workdir)
        return render([t.replace("~/tour/", "").replace("~/tour", ".") for t in transcripts])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="run the steps in a pseudo-terminal; exit 1 if "
                        "docs/tour.md differs")
    parser.add_argument("--driver", choices=("tmux", "pty"), default="tmux", help="how the steps are typed (default "
                        "tmux; --check uses pty)")
    args = parser.parse_args(argv)
    text = generate("pty" if args.check else args.driver)
    if args.check:
        if comparable(DOC.read_text(encoding="utf-8")) != comparable(text):
            print("docs/tour.md differs from what acrl prints now: python docs/tour.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC.relative_to(Path.cwd()) if DOC.is_relative_to(Path.cwd()) else DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
