"""ACRL-S*: security. No secret in the job environment or in any spec value (a URL with user:password@, a
token-shaped value), and every environment name is a name, checked before the model script is sourced.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..._secrets import ENV_NAME as ANY_ENV_NAME
from ..._secrets import (
    address_has_credentials,
    has_credentials_in_url,
    is_credential_flag,
    is_env_name,
    is_secret_name,
    looks_secret_value,
    refuse_forward,
)
from ..model_args.resolve import ENV_NAME, script_env_problems
from .engine import EACH_VALUE, FLAG_TABLES, Context, Finding, rule, spec_strings


@rule("ACRL-S001", "error", ["env.vars", "cluster.env", "env.forward", "model.script_env"],
      "no secrets in the job environment", reads=("wandb.key_env",))
def _secret_env(ctx: Context) -> Iterator[Finding]:
    """[env] vars, [cluster] env and [model] script_env names must not look like secrets (they are written into
    train.sh, join.sh, the Ray job's metadata and the model script's environment); [env] forward must not name a
    secret, the W&B key's variable ([wandb] key_env), ACRL_RAY_ADDRESS / RAY_ADDRESS (which may hold user:password)
    or AWS_*: train.sh would copy its value into the Ray job's metadata."""
    key_env = ctx.spec.wandb.key_env
    for table, names in (("env.vars", ctx.spec.env.vars), ("cluster.env", ctx.spec.cluster.env),
                         ("model.script_env", ctx.spec.model.script_env)):
        for name in names:
            if is_secret_name(name) or name.upper() == key_env.upper():
                yield Finding(f"{name} looks like a secret: [{table.split('.')[0]}] {table.split('.')[1]} are "
                              "written into train.sh, the bundle and the job's environment (visible in the Ray "
                              "dashboard)", "export it in the cluster's environment instead",
                              keys=(f"{table}.{name}",))
    for i, name in enumerate(ctx.spec.env.forward):
        why = refuse_forward(name, key_env)
        if why is not None:
            yield Finding(f"forwarding {name} would copy its value into the Ray job's metadata "
                          f"(--runtime-env-json): {why}",
                          "remove it from [env] forward and export it on the cluster (a local head started by "
                          "train.sh inherits the launching shell's environment)", keys=(f"env.forward.{i}",))
    yield from _env_names_valid([*((n, f"env.vars.{n}") for n in ctx.spec.env.vars),
                                 *((n, f"cluster.env.{n}") for n in ctx.spec.cluster.env),
                                 *((n, f"env.forward.{i}") for i, n in enumerate(ctx.spec.env.forward))])


def _env_names_valid(names: Iterable[tuple[str, str]], hint: str = "use letters, digits and '_'") -> Iterator[Finding]:
    for name, key in names:
        if not ANY_ENV_NAME.fullmatch(name):
            yield Finding(f"{name!r} is not an environment variable name", hint, keys=(key,))


@rule("ACRL-S002", "error", ["wandb.key_env", "model.script_env"], "environment names are names",
      before_sourcing=True)
def _env_names(ctx: Context) -> Iterator[Finding]:
    """wandb.key_env and model.script_env must be environment variable names (never the key itself). The model
    script is sourced with [model.script_env] as its environment, so none of its names may change how bash, the
    loader or libc behave (BASH_ENV, ENV, BASH_FUNC_*, SHELLOPTS, PS4, IFS, PATH, LD_*, ...) and no value may hold a
    NUL byte. Checked before anything is sourced."""
    if not ENV_NAME.fullmatch(ctx.spec.wandb.key_env):  # never shown: it may be the key itself
        yield Finding("[wandb] key_env is not the name of an environment variable (1-128 letters, digits and '_', "
                      "not starting with a digit)", "name the variable, e.g. WANDB_API_KEY; never the key itself",
                      keys=("wandb.key_env",))
    for name, message, hint in script_env_problems(ctx.spec.model.script_env):
        yield Finding(message, hint, keys=(f"model.script_env.{name}",))


@rule("ACRL-S003", "error", ["cluster.address", "env.vars", "cluster.env", "model.script_env", "extra.flags",
                            "extra.args"],
      "no credentials in spec values", reads=(EACH_VALUE,))
def _value_credentials(ctx: Context) -> Iterator[Finding]:
    """No string value of the spec may hold a credential: a URL or address with user:password@ ([cluster] address,
    an [env] vars HTTPS_PROXY, a flag value), or a token-shaped value (a W&B key, sk-..., AKIA..., hf_..., a JWT).
    Every value reaches train.sh, spec.toml, an argv or the Ray job's metadata."""
    address = ctx.spec.cluster.address or ""
    if address_has_credentials(address):
        yield Finding("the Ray address carries credentials (user:password@), which would be written into the "
                      "bundle", "give the address without them in the spec, and the authenticated one at run time "
                      "in the environment: ACRL_RAY_ADDRESS=... bash train.sh (or acrl run with ACRL_RAY_ADDRESS "
                      "exported)", keys=("cluster.address",))
    for key, name, text in spec_strings(ctx.spec):
        if (key == "cluster.address" and address_has_credentials(text)) or key == "wandb.key_env" or \
                (key.startswith(FLAG_TABLES) and is_credential_flag(text)):
            continue  # reported above, by ACRL-S004 or by ACRL-F001
        if has_credentials_in_url(text):
            yield Finding("the value holds a URL with user:password@, which would be written into the bundle "
                          "and the job's environment", "remove the credentials from the spec: export the "
                          "authenticated URL in the cluster's environment", keys=(key,))
        elif looks_secret_value(text, name):
            yield Finding("the value looks like a secret (an API key or token), which would be written into the "
                          "bundle", "remove it from the spec and export it in the cluster's environment; name its "
                          "variable where acrl asks for one ([wandb] key_env)", keys=(key,))


@rule("ACRL-S004", "error", ["wandb.key_env"], "wandb.key_env names a variable, not a key")
def _key_env_shape(ctx: Context) -> Iterator[Finding]:
    """[wandb] key_env must be an environment-variable-shaped name (upper case letters, digits and '_', at most 64)
    that is not itself token-shaped: train.sh prints it on every run without W&B. The value is never echoed."""
    if ANY_ENV_NAME.fullmatch(ctx.spec.wandb.key_env) and not is_env_name(ctx.spec.wandb.key_env):
        yield Finding("[wandb] key_env must name the environment variable that holds the key (upper case letters, "
                      "digits and '_'); the value given looks like a key, or is not such a name",
                      "write key_env = \"WANDB_API_KEY\" and export the key itself in that variable on the cluster; "
                      "if a real key was written here, revoke it")
