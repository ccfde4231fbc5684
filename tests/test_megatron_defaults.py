"""acrl.compiler._slime.megatron_defaults: Megatron-LM's flag defaults read from its source text (add_argument calls
and the dataclass fields ArgumentGroupFactory makes flags of), and the generated copy in tests/data/megatron/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acrl.compiler._slime.megatron_defaults import megatron_defaults
from acrl.compiler._slime.model_facts import FactsError
from conftest import REPO

MEGATRON_COMMIT = "1dcf0dafa884ad52ffb243625717a3471643e087"  # the Megatron-LM slime 624b824 uses
DATA = REPO / "tests" / "data" / "megatron" / MEGATRON_COMMIT / "megatron_defaults.json"


def megatron_tree(root: Path) -> Path:
    """A Megatron-LM tree of the shape of 1dcf0daf's: megatron/training/arguments.py adds flags with add_argument and
    with ArgumentGroupFactory over a dataclass whose base is in megatron/core (argument_utils.py's rules)."""
    (root / "megatron" / "training").mkdir(parents=True)
    (root / "megatron" / "core").mkdir(parents=True)
    (root / "megatron" / "core" / "parallel.py").write_text(
        "from dataclasses import dataclass\n\n@dataclass\nclass ParallelConfig:\n"
        "    pipeline_model_parallel_size: int = 1\n    \"\"\"Pipeline size.\"\"\"\n"
        "    sequence_parallel: bool = False\n", encoding="utf-8")
    (root / "megatron" / "core" / "transformer.py").write_text(
        "import enum\nfrom dataclasses import dataclass, field\nfrom typing import Literal, Optional\n"
        "from megatron.core.parallel import ParallelConfig\n\n"
        "class AttnBackend(enum.Enum):\n    flash = 1\n    auto = 5\n\n"
        "@dataclass\nclass TransformerConfig(ParallelConfig):\n"
        "    num_layers: int = field(default=0, metadata={'argparse_meta': {'default': None}})\n"
        "    hidden_dropout: float = 0.1\n"
        "    masked_softmax_fusion: bool = True\n"
        "    moe_token_dispatcher_type: Literal['allgather', 'alltoall'] = 'allgather'\n"
        "    moe_layer_freq: Optional[int] = None\n"
        "    attention_backend: AttnBackend = AttnBackend.auto\n"
        "    cuda_graph_bs: list[int] = field(default_factory=list)\n"
        "    offload_size: int = 1024 * 1024\n"
        "    excluded_one: int = 3\n", encoding="utf-8")
    (root / "megatron" / "training" / "arguments.py").write_text(
        "import os\nfrom megatron.training.argument_utils import ArgumentGroupFactory\n"
        "from megatron.core.transformer import TransformerConfig\n\n"
        "def _add_network_size_args(parser):\n"
        "    factory = ArgumentGroupFactory(TransformerConfig, exclude=['excluded_one'])\n"
        "    factory.build_group(parser, 'transformer')\n"
        "    group = parser.add_argument_group(title='x')\n"
        "    group.add_argument('--rotary-percent', type=float, default=1.0)\n"
        "    group.add_argument('--excluded-one', type=int, default=7)\n"
        "    group.add_argument('--local-rank', type=int, default=int(os.getenv('LOCAL_RANK', '0')))\n"
        "    group.add_argument('--no-gradient-accumulation-fusion', action='store_false', dest='g')\n"
        "    return parser\n", encoding="utf-8")
    return root


def test_add_argument_and_factory_defaults_as_argparse_would_have_them(tmp_path: Path) -> None:
    facts = megatron_defaults(megatron_tree(tmp_path))
    defaults = {flag: fact.get("default", fact.get("expression")) for flag, fact in facts.items()}
    assert defaults == {
        "--attention-backend": "auto",  # enum_type_handler: `--attention-backend auto` is AttnBackend.auto
        "--cuda-graph-bs": [],  # default_factory=list
        "--excluded-one": 7,  # excluded from the factory; its add_argument's
        "--hidden-dropout": 0.1,
        "--local-rank": "int(os.getenv('LOCAL_RANK', '0'))",  # not a literal: recorded, never guessed
        "--moe-layer-freq": None,
        "--moe-token-dispatcher-type": "allgather",
        "--no-gradient-accumulation-fusion": True,
        "--no-masked-softmax-fusion": True, "--disable-masked-softmax-fusion": True,  # bool default True: store_false
        "--num-layers": None,  # argparse_meta's default wins over the field's
        "--offload-size": "1024 * 1024",
        "--pipeline-model-parallel-size": 1,  # a field of the base class
        "--rotary-percent": 1.0,
        "--sequence-parallel": False,
    }
    assert "expression" in facts["--local-rank"] and "default" not in facts["--local-rank"]
    assert facts["--sequence-parallel"]["action"] == "store_true"
    assert facts["--no-masked-softmax-fusion"]["action"] == "store_false"
    assert facts["--moe-token-dispatcher-type"]["type"] == "str" and facts["--hidden-dropout"]["type"] == "float"
    assert facts["--rotary-percent"]["via"] == "megatron/training/arguments.py:9"
    assert facts["--pipeline-model-parallel-size"]["via"].startswith("ArgumentGroupFactory ")


def test_not_a_megatron_tree_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FactsError, match=r"megatron/training/arguments\.py"):
        megatron_defaults(tmp_path)


def test_the_generated_facts_hold_megatrons_defaults_that_slimes_scripts_restate() -> None:
    """Megatron-LM 1dcf0daf: megatron/core/model_parallel_config.py pipeline/context/expert sizes 1 (fields of
    TransformerConfig's base, made flags at megatron/training/arguments.py:1644), --rotary-percent 1.0 (:1680),
    moe_token_dispatcher_type "allgather" (megatron/core/transformer/transformer_config.py)."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert data["provenance"]["commit"] == MEGATRON_COMMIT
    flags = data["flags"]
    for flag in ("--pipeline-model-parallel-size", "--context-parallel-size", "--expert-model-parallel-size",
                 "--tensor-model-parallel-size"):
        assert flags[flag]["default"] == 1 and flags[flag]["type"] == "int"
    assert flags["--rotary-percent"]["default"] == 1.0
    assert flags["--moe-token-dispatcher-type"]["default"] == "allgather"
    assert flags["--moe-grouped-gemm"] == {"via": "ArgumentGroupFactory TransformerConfig.moe_grouped_gemm",
                                           "action": "store_true", "default": False}
    assert flags["--lr"]["default"] is None  # slime resets it (reset_arg), see tests/data/slime


MEGATRON_DIR = os.environ.get("ACRL_MEGATRON_DIR")


@pytest.mark.upstream("ACRL_MEGATRON_DIR")  # a Megatron-LM git directory holding MEGATRON_COMMIT
def test_the_generated_facts_are_what_the_generator_writes(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "acrl.compiler._slime.megatron_defaults", str(MEGATRON_DIR),
                           "--commit", MEGATRON_COMMIT, "-o", str(tmp_path)], capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "megatron_defaults.json").read_text(encoding="utf-8").replace(
        f"-o {tmp_path}", f"-o {DATA.parent.relative_to(REPO)}") == DATA.read_text(encoding="utf-8")
