"""The converter unstructures with cattrs' field loop instead of generated code (docs/performance.md):
the data is exactly what cattrs' generated functions give, for every table and every value type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cattrs
import pytest

from acrl.compiler import compile_spec
from acrl.compiler._pipeline.structure import converter
from acrl.compiler._spec.tables import Spec
from conftest import EXAMPLE_SPECS, NO_FACTS, REPO, SpecWriter

EVERYTHING_SET: dict[str, Any] = {
    "experiment": {"seed": 7, "num_rollout": 10},
    "model": {"ref_load": "/ref", "script_env": {"A": "1"}, "overrides": {"vocab-size": 151936},
              "hf_config": str(REPO / "tests" / "fixtures" / "hf" / "Qwen2.5-3B-Instruct" / "config.json")},
    "data": {"label_key": "label", "metadata_key": "meta"},
    "cluster": {"colocate": False, "rollout_num_gpus": 4, "address": "http://head:8265", "num_nodes": 1,
                "actor_num_nodes": 1, "actor_num_gpus_per_node": 4, "node_ip_address": "10.0.0.1",
                "ray_start_args": ["--num-cpus", "4"], "env": {"HIP_VISIBLE_DEVICES": "0"}, "gpu": "H100"},
    "rollout": {"max_prompt_len": 10, "max_context_len": 100, "top_p": 0.5, "over_sampling_batch_size": 64,
                "custom_generate_function_path": "a.b", "custom_rm_path": "c.d"},
    "sglang": {"context_length": 100, "reasoning_parser": "qwen3"},
    "algorithm": {"kl_loss_coef": 0.1, "kl_coef": 0.0, "entropy_coef": 0.01},
    "train": {"micro_batch_size": 2, "adam_beta1": 0.9},
    "eval": {"interval": 2, "datasets": {"a": "/a.jsonl", "b": "/b.jsonl"}, "n_samples_per_prompt": 2,
             "temperature": 0.5, "max_response_len": 10},
    "checkpoint": {"save": "/ckpt", "save_interval": 5, "save_hf": "/hf/{rollout_id}", "resume": "required",
                   "load": "/other", "load_optimizer": False, "load_rng": False, "ckpt_step": 3, "start_rollout_id": 4,
                   "scheduler": "checkpoint", "format": "torch"},
    "cuda": {"home": "/usr/local/cuda"},
    "wandb": {"project": "p", "group": "g"},
    "env": {"vars": {"X": "1"}, "forward": ["A", "B"], "pythonpath": ["/p"], "pythonpath_before_megatron": ["/q"]},
    "kuberay": {"image": "registry.example/slime:v1", "namespace": "rl", "service_account": "slime-irsa",
                "secrets": {"WANDB_API_KEY": "optional"}, "labels": {"team": "rl"}, "annotations": {"a/b": "c"},
                "volumes": [{"name": "fsx", "mount_path": "/fsx", "claim": "fsx", "read_only": True},
                            {"name": "h", "mount_path": "/h", "host_path": "/mnt/h"}],
                "image_paths": ["/opt"], "ray_version": "2.49.0", "shutdown_after_job_finishes": True,
                "ttl_seconds_after_finished": 60, "active_deadline_seconds": 86400,
                "pre_running_deadline_seconds": 600, "backoff_limit": 1,
                "head": {"cpu": "8", "memory": "32Gi", "cpu_limit": "8", "memory_limit": "32Gi",
                         "resources": {"ephemeral-storage": "10Gi"}, "node_selector": {"pool": "cpu"},
                         "node_affinity": {"zone": ["a"]}, "tolerations": [{"key": "k", "value": "v"}],
                         "shm_size": "8Gi"},
                "worker": {"cpu": "96", "memory": "1Ti", "cpu_limit": "96", "memory_limit": "1Ti",
                           "resources": {"vpc.amazonaws.com/efa": "32"}, "node_selector": {"pool": "gpu"},
                           "node_affinity": {"zone": ["a"]}, "instance_types": ["p5.48xlarge"],
                           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute",
                                            "toleration_seconds": 60}], "shm_size": "512Gi"},
                "submitter": {"cpu": "1", "memory": "1Gi", "cpu_limit": "2", "memory_limit": "2Gi",
                              "node_selector": {"pool": "cpu"}, "tolerations": [{"operator": "Exists"}]}},
    "extra": {"flags": {"--a": True, "--b": 1, "--c": 0.5, "--d": "x", "--e": [1, 2.5, "z"]}, "args": ["--f", "1"]},
    "slime": {"commit": NO_FACTS},  # made-up escape-hatch flags: no flag facts apply
    "opd": {"enabled": True, "type": "megatron", "kl_coef": 0.5, "teacher_load": "/t", "teacher_ckpt_step": 3},
    "weight_sync": {"mode": "full", "transport": "disk", "disk_dir": "/w", "disk_keep_files": True,
                    "local_checkpoint_dir": "/l", "delta_encoding": "xor", "delta_checksum": "blake3",
                    "custom_post_write_path": "e.f", "encoding": "deltas", "delta_keep_files": True,
                    "custom_delta_pre_push_path": "g.h", "buffer_size": 1024, "release_train": True},
}


def generated_unstructure(spec: Spec) -> Any:
    """What cattrs' Converter gives by default: a generated function per attrs class."""
    return cattrs.Converter(forbid_extra_keys=True, detailed_validation=True).unstructure(spec)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_example_specs_unstructure_as_with_generated_code(spec: Path) -> None:
    resolved = compile_spec(spec).spec
    assert converter().unstructure(resolved) == generated_unstructure(resolved)


def test_every_field_set_unstructures_as_with_generated_code(write_spec: SpecWriter) -> None:
    spec = compile_spec(write_spec(EVERYTHING_SET)).spec
    ours, theirs = converter().unstructure(spec), generated_unstructure(spec)
    # num_epoch excludes num_rollout (ACRL-B006): set one, the other is None; the epoch spec is below
    assert [(table, key) for table, values in ours.items() for key, value in values.items() if value is None] == \
        [("experiment", "num_epoch")]
    assert ours == theirs
    epochs = compile_spec(write_spec({**EVERYTHING_SET, "experiment": {"seed": 7, "num_epoch": 3}})).spec
    assert converter().unstructure(epochs) == generated_unstructure(epochs)
    assert repr(ours) == repr(theirs)  # the same types and key order too (spec.toml is written from it)
