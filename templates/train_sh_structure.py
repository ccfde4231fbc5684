"""The readable structure of train.sh.jinja and model_args.sh.jinja: what the review tools
(`acrl diff`, `acrl explain`, `acrl-compile --check`, `acrl run`'s preflight) read back from a
bundle's shell files, declared here beside the templates so that a change to one is a change to
the other. acrl.compiler._review.train_sh reads the files through the one shell lexer
(acrl.compiler._shell.lexer) by this declaration; tests/test_train_sh_structure.py renders every
template branch and checks that each name below reads back as what the compiler put there.

Everything else in train.sh is script: compared line by line, never interpreted.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Array(NamedTuple):
    """A bash array the templates assign (``NAME=( ... )``, then ``NAME+=( ... )``)."""

    file: str
    holds: str
    titled: bool  # a comment line alone inside the array titles the words after it (acrl's flag groups)


ARRAYS = {
    "SLIME_ARGS": Array(
        "train.sh",
        "slime's flags after MODEL_ARGS: one titled group per argv group (`SLIME_ARGS=( # title ... )`), then "
        "appended (`SLIME_ARGS+=( ... )`): the [extra] args, --custom-config-path custom_config.yaml, the W&B "
        "flags (--use-wandb and the wandb_args, when the key variable is set), --train-env-vars (CUDA pinned) and, "
        "with [checkpoint] save or load, what the checkpoint block decides at launch: --load \"$FROM\", "
        "--ckpt-step \"$CKPT_STEP\", --start-rollout-id \"$START_ROLLOUT_ID\" (appended by checkpoint.sh, which "
        "train.sh sources: read in place of the line `source \"$BUNDLE_DIR/checkpoint.sh\"`)",
        titled=True),
    "MODEL_ARGS": Array("model_args.sh", "the model's flags, frozen at compile time, one flag per line",
                        titled=False),
}

# `readonly NAME=value` / `export NAME=value` lines: each is a launch setting named NAME. These are
# the ones the compiler fills from the spec (name -> the template variable); the others are constant.
SCALARS = {
    "EXP_ID": "exp_id",
    "SLIME_DIR": "slime_dir",
    "MEGATRON_DIR": "megatron_dir",
    "CUDA_HOME": "cuda_home",  # only when [cuda] home pins a toolkit
}
DECLARE = re.compile(r"^[ \t]*(?:readonly|export)[ \t]+(?P<name>[A-Za-z_]\w*)=")

# Whole lines that hold one launch setting: (pattern, setting, placeholder). The pattern's group 1
# is the value; the placeholder stands for the line among the script lines (a changed value shows
# once, as a launch setting; a moved line shows as a script change).
WANDB_KEY, RAY_STOP_TIMEOUT = "W&B key variable", "Ray stop timeout (s)"
LAUNCH_LINES = (
    (re.compile(r"^\s*if \[\[ -n \$\{(\w+):-\} \]\]; then$"), WANDB_KEY, "if <W&B key variable is set>; then"),
    (re.compile(r'^\s*log "W&B off: (\w+) is not set"$'), WANDB_KEY, "log <W&B off>"),
    (re.compile(r"^\s*deadline=\$\(\(SECONDS \+ (\d+)\)\)$"), RAY_STOP_TIMEOUT, "deadline=<Ray stop timeout>"),
    # [cluster] node_ip_address: `MASTER_ADDR=${MASTER_ADDR:-'<address>'}` (empty: only MASTER_ADDR, nodes join)
    (re.compile(r"^\s*MASTER_ADDR=\$\{MASTER_ADDR:-(.*)\}$"), "head address (unless MASTER_ADDR is set)",
     "MASTER_ADDR=${MASTER_ADDR:-<launch setting head address>}"),
)
# The line after `deadline=...`: its message repeats the timeout, so it is a placeholder only.
DEADLINE_DIE = re.compile(r'^\s*\(\(SECONDS < deadline\)\) \|\| die "[^"$`\\]*"$')
DEADLINE_DIE_PLACEHOLDER = "((SECONDS < deadline)) || die <Ray stop timeout>"

# `CLUSTER_ADDRESS=${ACRL_RAY_ADDRESS:-'<the spec's address>'}`, then (no address: a local head)
# `CLUSTER_ADDRESS="http://127.0.0.1:<dashboard port>"`; `ray start --head <its flags>`.
RAY_ADDRESS = re.compile(r"^\s*CLUSTER_ADDRESS=(.*)$")
RAY_ADDRESS_OVERRIDE = "ACRL_RAY_ADDRESS"
RAY_START = re.compile(r"^\s*ray start --head (.*)$")
# [cluster] env: `NODE_ENV=(` alone on its line, one `NAME=value` word a line, `)` alone: the environment
# `ray start` gets (train.sh's head; join.sh's nodes). Each is the launch setting "Ray nodes' env NAME".
NODE_ENV_OPEN = re.compile(r"^\s*NODE_ENV=\($")
NODE_ENV_CLOSE = re.compile(r"^\s*\)$")
NODE_ENV_SETTING = "Ray nodes' env "

# The Ray job's environment: `RUNTIME_ENV_JSON=$(NAME=value ... python3 -c '...')`, whose Python
# body starts from the literal `env = {...}` (PYTHONPATH from ACRL_MEGATRON_DIR, or ACRL_PYTHONPATH when
# [env] pythonpath entries surround Megatron's) and adds the spec's [env] vars (ACRL_ENV_VARS, JSON),
# the forwarded names (ACRL_FORWARD, space-separated) and the pinned CUDA variables (ACRL_PIN_CUDA).
RUNTIME_ENV = "RUNTIME_ENV_JSON"
ENV_ASSIGNMENTS = frozenset({"ACRL_ENV_VARS", "ACRL_FORWARD", "ACRL_PIN_CUDA", "ACRL_PYTHONPATH"})
BASE_ENV = re.compile(r'^env = \{(.*)\}$', re.M)
BASE_ENV_PAIR = re.compile(r'"(\w+)": (?:"([^"\\]*)"|os\.environ\["(\w+)"\])')
