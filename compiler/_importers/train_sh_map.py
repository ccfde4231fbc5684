"""The second half of `acrl import train-sh`: the flags of a launch script's train.py command, and
the variables around it, mapped onto spec keys (see :mod:`acrl.compiler._importers.train_sh` for the first half)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .._pipeline.bundle import YAML_LIMIT, read_input
from .._secrets import is_credential_flag, looks_secret_value, without_credentials
from .._shell.eval import Shell, Text
from .._spec.flag_index import CoerceError, FlagKey, coerce, extra_value, flag_index, key_of
from .._spec.flags import did_you_mean, known_absent_flags
from .._spec.profiles import TOOLKIT_ROLLOUT, Integration
from .._spec.tables import TOOLKIT_SLIME_COMMIT
from .base import ImportInputError, Note, NoteKind, experiment_id, load_yaml
from .train_sh_profile import choose, default_of, faithful, faithful_note, whose

_TABLES = ("experiment", "agentcore", "model", "data", "slime", "cluster", "parallel", "rollout", "sglang",
           "algorithm", "train", "opd", "weight_sync", "eval", "checkpoint", "cuda", "wandb", "extra")
# custom-config key -> spec key (the keys acrl writes into custom_config.yaml, see _render.custom_config)
_CUSTOM_CONFIG = {
    "agent_runtime_arn": "agentcore.runtime_arn", "s3_bucket": "agentcore.s3_bucket", "exp_id": "experiment.id",
    "gateway_port": "agentcore.gateway_port", "acr_timeout": "agentcore.timeout", "model_id": "agentcore.model_id",
    "acr_tps_limit": "agentcore.tps_limit", "max_concurrent": "agentcore.max_concurrent",
    "max_pool_connections": "agentcore.max_pool_connections",
    "reward_postprocessing": "agentcore.reward_postprocessing",
    "cumulative_token_mode": "agentcore.cumulative_token_mode", "renderer_family": "agentcore.renderer_family",
    "gateway_log_level": "agentcore.gateway_log_level",
}
# `--flag=value`, one argv word that argparse reads as the flag and its value
INLINE_FLAG = re.compile(r"(--[A-Za-z0-9][\w-]*)=(.*)", re.DOTALL)
# flags train.sh adds itself at run time, from spec keys that are not flags
_RUN_TIME = {
    "--train-env-vars": "acrl passes --train-env-vars itself (CUDA_HOME and LD_LIBRARY_PATH) when [cuda] home is "
                        "set",
    "--use-wandb": "acrl passes --use-wandb only when the variable named by [wandb] key_env is set at run time",
}


@attrs.define
class Occurrence:
    flag: str
    values: list[Text]
    token: Text
    before_model: bool = False  # written before ${MODEL_ARGS[@]} on the command line


@attrs.define
class SpecBuilder:
    """The spec being built, and the notes about it."""

    path: Path
    shell: Shell
    notes: list[Note]
    torch_memory_saver: bool
    spec: dict[str, Any] = attrs.Factory(lambda: {t: {} for t in _TABLES})
    integration: Integration = "agentcore"  # chosen once the flags are read (train_sh_profile.choose)
    given: frozenset[str] = frozenset()  # the flags of the train.py command, once read
    commit: str = TOOLKIT_SLIME_COMMIT  # the targeted slime commit (target.py): flags it lacks are left out

    def note(self, kind: NoteKind, message: str, text: Text | None = None) -> None:
        if text is not None:
            self.notes += text.notes
        self.notes.append(Note(kind, message, f"{self.path}:{text.line}" if text and text.line else str(self.path)))

    def set(self, path: str, value: Any, text: Text | None = None) -> None:
        table, key = path.split(".", 1)
        self.spec[table][key] = value
        if text is not None:
            self.notes += text.notes

    def unique_notes(self) -> Iterable[Note]:
        return dict.fromkeys(self.notes)

    def entry(self, entry: Text) -> None:
        if entry.text.endswith("train_async.py"):
            self.set("train.mode", "async")
        if entry.problem:
            self.note("unresolved", f"[slime] dir: the train.py path {entry.text} cannot be resolved: {entry.problem}; "
                                    "set [slime] dir by hand", entry)
        elif "/" in entry.text:
            self.set("slime.dir", entry.text.rsplit("/", 1)[0], entry)
        megatron = self.variable("MEGATRON_DIR")
        if megatron is not None and megatron.problem:
            self.note("unresolved", f"[slime] megatron_dir: {megatron.problem}; set it by hand", megatron)
        elif megatron is not None:
            self.set("slime.megatron_dir", megatron.text, megatron)
        cuda = self.shell.env.get("CUDA_HOME")
        if cuda is not None and cuda.exported and (text := self.variable("CUDA_HOME")) is not None:
            if text.problem:
                self.note("unresolved", f"[cuda] home: CUDA_HOME is exported but {text.problem}", text)
            else:
                self.set("cuda.home", text.text, text)
        if not self.torch_memory_saver:
            self.set("cuda.fix_torch_memory_saver", False)

    def address(self, text: Text) -> None:
        """An existing cluster's address; a local head's (127.0.0.1, localhost, empty) is the default.
        A user:password in it is never copied (ACRL-S003): it is given at run time."""
        address = without_credentials(text.text)
        if address != text.text:
            self.note("difference", "[cluster] address: the Ray address carries user:password, which a spec never "
                                    "holds; it is left out: give the address with them at run time "
                                    "(ACRL_RAY_ADDRESS=... bash train.sh, or acrl run --address ...)", text)
        if text.problem:
            self.note("unresolved", f"[cluster] address: the Ray address {address} cannot be resolved: "
                                    f"{text.problem}; a local Ray head is the default", text)
        elif address and not re.match(r"^(\w+://)?(127\.0\.0\.1|localhost)(:\d+)?/?$", address):
            self.set("cluster.address", address, text)

    def variable(self, name: str) -> Text | None:
        """The variable's one value; one made from a secret counts as unresolved (it is never copied)."""
        value = self.shell.env.get(name)
        if value is None or len(value.texts) != 1 or value.is_array:
            return None
        text = value.texts[0]
        if text.secret and not text.problem:
            return attrs.evolve(text, text=f"${name}", problem=f"{name} is made from the secret {text.secret}, "
                                "which is never copied into a spec", notes=())
        return text

    def model(self, model_type: Text | None, tokens: list[Text], from_file: bool) -> None:
        if model_type is not None and not model_type.problem:
            self.set("model.type", model_type.text, model_type)
        else:
            self.note("unresolved", "[model] type: the script sources no scripts/models/<type>.sh that can be "
                                    "resolved; set [model] type by hand", model_type)
        if tokens:
            args: dict[str, Any] = {}
            for occurrence in _group(tokens, self):
                secret = next((v.secret for v in occurrence.values if v.secret), None)
                if is_credential_flag(occurrence.flag) or secret or _secret_shaped(occurrence.values):
                    self.note("difference", f"MODEL_ARGS: {occurrence.flag} carries a secret"
                              f"{f' ({secret})' if secret else ''}: it is not copied into the spec", occurrence.token)
                    continue
                args[occurrence.flag.removeprefix("--")] = extra_value([v.text for v in occurrence.values])
            self.set("model.args", args)
        elif model_type is not None and not from_file:
            self.note("default", f"MODEL_ARGS: the script sources slime's scripts/models/{model_type.text}.sh on the "
                                 f"cluster; acrl resolves them at compile time from [model] type (its catalog "
                                 "entry, else that script in [slime] dir) and freezes them in model_args.sh",
                      model_type)

    def flags(self, occurrences: list[Occurrence], model_flags: Mapping[str, int]) -> None:
        """Each flag's last occurrence to its key, a MODEL_ARGS override or [extra.flags] (``model_flags``: the flags
        MODEL_ARGS holds -> the line that put them there)."""
        index = flag_index()
        last: dict[str, Occurrence] = {}
        for occurrence in occurrences:
            if occurrence.flag in last:
                lines = [o.token.line for o in occurrences if o.flag == occurrence.flag]
                self.note("difference", f"{occurrence.flag} is given {len(lines)} times (lines "
                          f"{', '.join(map(str, lines))}): the last one counts, as in slime's parser", occurrence.token)
                del last[occurrence.flag]
            last[occurrence.flag] = occurrence
        self.given = frozenset(last)
        absent = known_absent_flags(self.commit) or {}
        function = last.get("--rollout-function-path")  # the profile's guess until choose() (global_batch reads it)
        toolkit = function is not None and [v.text for v in function.values] == [TOOLKIT_ROLLOUT]
        self.integration = "agentcore" if toolkit or "--custom-config-path" in last else "slime"
        for flag, occurrence in last.items():
            values, token = occurrence.values, occurrence.token
            key = (key_of(flag, self.commit) or (None,))[0]  # by another name too: --sglang-dp-size
            problem = next((v for v in values if v.problem), None)
            secret = next((v.secret for v in values if v.secret), None)
            if is_credential_flag(flag) or secret or _secret_shaped(values):
                name = secret or self.spec["wandb"].get("key_env", "WANDB_API_KEY")
                self.note("difference", f"{flag} carries a secret: it is not copied into the spec; acrl reads "
                                        f"secrets from the environment only ([wandb] key_env names {name})", token)
            elif flag in _RUN_TIME:
                if token.only_if and flag == "--use-wandb":
                    self.wandb_key(token.only_if)
                else:
                    self.note("difference", f"{flag} is not copied: {_RUN_TIME[flag]}", token)
            elif problem is not None:
                fallback = f"the spec's default applies ([{key.table}] {key.key})" if key and key.default is not \
                    attrs.NOTHING else f"set [{key.table}] {key.key} by hand" if key else "not imported"
                self.note("unresolved", f"{flag}: {problem.problem}; {fallback}", problem)
            elif flag == "--custom-config-path":
                self.custom_config(values)
            elif flag in absent:
                close = f"; did you mean {m}?" if (m := did_you_mean(flag, self.commit)) else ""
                self.note("difference", f"{flag} is left out: slime at the targeted commit {self.commit[:7]} has no "
                                        f"such flag ({absent[flag]}); it did nothing{close}", token)
            elif flag == "--global-batch-size":
                self.global_batch(values, token, "--num-steps-per-rollout" in last)
            elif flag in model_flags:
                self.model_override(occurrence, key, model_flags[flag])
            elif key is not None:
                self.keyed(key, values, token)
            else:
                self.spec["extra"].setdefault("flags", {})[flag] = extra_value([v.text for v in values])
                self.note("escape-hatch", f"{flag}: no spec key sets it; put in [extra.flags]", token)
        self.profile()
        self.defaults(index, last, {k[0].path for f in last if (k := key_of(f, self.commit)) is not None})

    def profile(self) -> None:
        """Choose the integration profile; slime and custom write it and no [agentcore] (the profile's defaults
        follow)."""
        self.integration, why = choose(self.spec)
        if self.integration == "agentcore":
            return
        self.set("experiment.integration", self.integration)
        self.note("default", f'[experiment] integration = "{self.integration}": {why}; no [agentcore], no custom '
                             "config, and slime's defaults where the script passes nothing (docs/spec.md)")
        if self.spec["agentcore"]:
            self.spec["agentcore"] = {}
            self.note("difference", "the custom config names no agent_runtime_arn: its [agentcore] keys are left out")

    def model_override(self, occurrence: Occurrence, key: FlagKey | None, line: int) -> None:
        """A flag MODEL_ARGS sets (on ``line``) that the command line gives again: argparse keeps the last one."""
        flag, token = occurrence.flag, occurrence.token
        if occurrence.before_model:
            self.note("difference", f"{flag} is given on line {token.line} before MODEL_ARGS, which sets it too (line "
                                    f"{line}): argparse keeps MODEL_ARGS' value, so line {token.line}'s is not "
                                    "imported", token)
            return
        target = f"[{key.table}] {key.key}" if key is not None else f"[model] overrides {flag.removeprefix('--')!r}"
        self.note("difference", f"{flag} is set by MODEL_ARGS (line {line}) and given again on line {token.line}: "
                                f"argparse keeps the last value, so line {token.line}'s is imported as {target}",
                  token)
        if key is not None:
            self.keyed(key, occurrence.values, token)
        else:
            self.spec["model"].setdefault("overrides", {})[flag.removeprefix("--")] = \
                extra_value([v.text for v in occurrence.values])

    def finish(self) -> dict[str, Any]:
        """The spec, once everything is read: the experiment id, empty tables left out."""
        if "id" not in self.spec["experiment"]:
            exp_id = self.variable("EXP_ID")
            derived = experiment_id(self.path.name)
            if exp_id is not None and not exp_id.problem:
                self.set("experiment.id", exp_id.text, exp_id)
            elif derived and exp_id is None:  # the script names no experiment (an unresolved EXP_ID is noted)
                self.set("experiment.id", derived)
                self.note("default", f"[experiment] id: neither a custom config's exp_id nor an EXP_ID variable names "
                                     f"the experiment; {derived!r} is made from the script's file name")
            else:
                why = f": {exp_id.problem}" if exp_id else ""
                self.note("unresolved", "[experiment] id: neither a custom config's exp_id nor an EXP_ID variable "
                                        f"names the experiment{why}; set it by hand")
        self.spec["experiment"] = dict(sorted(self.spec["experiment"].items(), key=lambda item: item[0] != "id"))
        return {table: keys for table, keys in self.spec.items() if keys}

    def keyed(self, key: FlagKey, values: list[Text], token: Text) -> None:
        if token.only_if:
            if key.table == "wandb":
                self.wandb_key(token.only_if)
            else:
                self.note("difference", f"{key.flag} was passed only when {token.only_if} is set; the spec passes it "
                                        "always", token)
        try:
            value = coerce(key, [v.text for v in values])
        except CoerceError as exc:
            value = " ".join(v.text for v in values)
            self.note("difference", f"{exc}: [{key.table}] {key.key} is set to {value!r} for you to correct", token)
        if key.flag == "--ref-load" and value == self.spec["model"].get("dir"):
            return  # acrl's default: the reference model is the checkpoint
        for v in values:
            self.notes += v.notes
        self.set(key.path, value, token)

    def defaults(self, index: Mapping[str, FlagKey], given: Mapping[str, Occurrence], keyed: Collection[str]) -> None:
        """Keys whose flag the script left out: off for switches, noted where acrl passes a default."""
        for flag, key in index.items():
            if key.path in keyed or key.table == "wandb" or (flag == "--num-rollout" and "--num-epoch" in given):
                continue
            default = default_of(key, self.integration)
            slime_value = faithful(key, self.integration)
            if slime_value is not None:
                self.set(key.path, slime_value)
                self.note("default", faithful_note(key, slime_value, default))
            elif key.kind == "switch":
                if default is True and key.sets is True:  # not --no-load-optim's [checkpoint] load_optimizer
                    self.set(key.path, False)
            elif default is attrs.NOTHING:
                if flag != "--hf-checkpoint" or "dir" not in self.spec["model"]:
                    self.note("unresolved", f"the script does not pass {flag}: set [{key.table}] {key.key} by hand")
            elif flag == "--ref-load":
                self.note("default", "the script does not pass --ref-load: acrl passes --ref-load with [model] dir")
            elif flag == "--megatron-to-hf-mode":
                if default == "auto":
                    self.note("default", "the script does not pass --megatron-to-hf-mode: acrl passes 'bridge' where "
                                         "the targeted slime has the flag ([model] megatron_to_hf_mode = 'auto')")
            elif default is not None and default is not False and default != {} and default != key.omit_if \
                    and key.path != "train.num_steps_per_rollout":
                self.note("default", f"the script does not pass {flag}: acrl passes {flag} {default} "
                                     f"({whose(key, self.integration)})")
        experiment = self.spec["experiment"]
        if "num_epoch" in experiment and "num_rollout" in experiment:
            del experiment["num_epoch"]
            self.note("difference", "--num-epoch is given with --num-rollout, so slime ignores it (num_epoch only "
                                    "counts without num_rollout); it is left out", given["--num-epoch"].token)
        if "--num-steps-per-rollout" not in given and "--global-batch-size" not in given:
            self.note("difference", "the script passes neither --num-steps-per-rollout nor --global-batch-size, so "
                                    "Megatron's fallback decided the optimizer steps per rollout; acrl passes "
                                    "--num-steps-per-rollout 1 and the derived --global-batch-size")

    def global_batch(self, values: list[Text], token: Text, with_steps: bool) -> None:
        rollout = self.spec["rollout"]
        index = flag_index()
        samples = rollout.get("batch_size", index["--rollout-batch-size"].default) * \
            rollout.get("n_samples_per_prompt", faithful(index["--n-samples-per-prompt"], self.integration) or
                        default_of(index["--n-samples-per-prompt"], self.integration))
        try:
            batch = int(values[0].text) if len(values) == 1 else 0
        except ValueError:
            batch = 0
        if with_steps:
            return  # acrl derives it from the steps; the compile checks the arithmetic
        if batch > 0 and isinstance(samples, int) and samples % batch == 0:
            self.set("train.num_steps_per_rollout", samples // batch)
            self.note("difference", f"--global-batch-size {batch} is derived by acrl: [train] num_steps_per_rollout "
                                    f"= {samples // batch} ({samples} samples per rollout / {batch})", token)
        else:
            self.note("difference", f"--global-batch-size {' '.join(v.text for v in values)} does not divide the "
                                    f"{samples} samples of a rollout: set [train] num_steps_per_rollout by hand", token)

    def wandb_off(self) -> None:
        """The script passes no W&B flag (no --use-wandb): slime logs nothing to W&B (--use-wandb is store_true,
        slime/utils/arguments.py:1163 at 624b824), whatever the environment holds; acrl's default turns it on
        whenever the key is set."""
        self.set("wandb.enabled", False)
        self.note("default", "the script passes no W&B flag (no --use-wandb): [wandb] enabled = false keeps W&B "
                             "off, as slime does, even where the key's variable is set when train.sh runs")

    def wandb_key(self, name: str) -> None:
        if name != "WANDB_API_KEY":
            self.set("wandb.key_env", name)

    def custom_config(self, values: list[Text]) -> None:
        if len(values) != 1:
            self.note("difference", "--custom-config-path takes one path; not read")
            return
        text = values[0]
        file = Path(text.text)
        file = file if file.is_absolute() else self.path.resolve().parent / file
        if not file.is_file():
            self.note("difference", f"the custom config {text.text} is not beside the script: fill in [agentcore] "
                                    "runtime_arn and s3_bucket (and the gateway keys) by hand", text)
            return
        import yaml  # lazy: PyYAML only when the script names a custom config beside it

        try:
            _, data = load_yaml(read_input(file, limit=YAML_LIMIT).decode("utf-8"), str(file))
        except (OSError, UnicodeDecodeError, yaml.YAMLError, ImportInputError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else \
                exc.reason if isinstance(exc, ImportInputError) else type(exc).__name__
            self.note("difference", f"the custom config {file.name} cannot be read ({why}): fill in "
                                    "[agentcore] by hand", text)
            return
        if not isinstance(data, dict):
            self.note("difference", f"the custom config {file.name} is not a mapping: fill in [agentcore] by hand",
                      text)
            return
        for name, value in data.items():
            target = _CUSTOM_CONFIG.get(str(name))
            if target is None or isinstance(value, dict | list):
                self.note("difference", f"custom config key {name!r} has no spec key: not carried over (acrl "
                                        "writes its own custom_config.yaml)", text)
            elif not isinstance(value, str | int | float | bool):  # null, a date, binary: no spec value
                self.note("unresolved", f"custom config key {name!r} in {file.name} is {type(value).__name__}, not "
                                        f"a string, number or boolean: set {target} by hand", text)
            else:
                self.set(target, value)


def _group(tokens: list[Text], builder: SpecBuilder) -> list[Occurrence]:
    out: list[Occurrence] = []
    for token in tokens:
        inline = INLINE_FLAG.match(token.text)
        if token.problem:
            builder.note("unresolved", f"MODEL_ARGS: {token.problem}", token)
        elif inline is not None:
            out.append(Occurrence(inline.group(1), [attrs.evolve(token, text=inline.group(2))], token))
        elif token.text.startswith("--"):
            out.append(Occurrence(token.text, [], token))
        elif out:
            out[-1].values.append(token)
    return out


def _secret_shaped(values: Iterable[Text]) -> bool:
    """A value written literally in the script that looks like a credential (a pasted key, a URL with
    user:password): never copied into the spec, whatever flag it follows."""
    return any(not v.problem and looks_secret_value(v.text) for v in values)
