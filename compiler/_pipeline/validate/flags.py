"""ACRL-F*: flags. No argv token passes a credential; the escape hatch ([extra.flags], [extra.args])
neither passes a spec key's flag, set or not, nor abbreviates an sglang flag acrl passes; flags exist at
the targeted slime commit and are known to the slime checkout when it is on the compiling machine; its
--sglang-* flags are flags of the sglang the targeted commit runs, and not deprecated there
(compiler/_slime/sglang_stack.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ..._secrets import is_credential_flag
from ..._slime.sglang_stack import sglang_at, slime_flag
from ..._spec.flag_index import CoerceError, FlagKey, coerce, key_of
from ..._spec.flags import did_you_mean, flag_tokens, is_number, known_absent_flags, normalize_flag
from .engine import FLAG_TABLES, Context, Finding, rule, spec_strings


def _escape_hatch(ctx: Context) -> Iterator[tuple[str, str]]:
    """(flag, spec key) of every flag in [extra.flags] and [extra.args]."""
    for name in ctx.spec.extra.flags:
        yield normalize_flag(name), f"extra.flags.{name}"
    for i, token in enumerate(ctx.spec.extra.args):
        if token.startswith("--"):
            yield token.split("=", 1)[0], f"extra.args.{i}"


def _emitted(ctx: Context) -> set[str]:
    """The flags acrl passes from spec keys (the escape hatch's excepted)."""
    return {a.flag for g in ctx.groups for a in g.args if not a.origin.startswith("extra.")}


@rule("ACRL-F001", "error", ["extra.flags", "extra.args", "model.args", "model.overrides"],
      "no credentials in flags")
def _credentials(ctx: Context) -> Iterator[Finding]:
    """No argv token may pass a credential (--wandb-key, --sglang-api-key, --*-password, ...), in any case, with
    '_', as --flag=value or as an argparse abbreviation (--wandb-k), as a table key or inside a list value: slime
    logs its whole argument namespace to W&B."""
    seen = set()
    for key, _, text in spec_strings(ctx.spec):
        if not key.startswith(FLAG_TABLES):
            continue
        token = normalize_flag(text) if key.count(".") == 2 and text == key.split(".", 2)[2] else text
        if is_credential_flag(token) and key not in seen:
            seen.add(key)
            yield Finding(f"{token.split('=', 1)[0]} passes a credential: it would be written into train.sh, the "
                          "process list and W&B (slime logs its whole argument namespace)",
                          "remove it and export the secret in the cluster's environment (for W&B: "
                          "WANDB_API_KEY, named by [wandb] key_env)", keys=(key,))


@rule("ACRL-F002", "error", ["extra.flags", "extra.args"], "escape hatch does not pass a spec key's flag")
def _duplicates(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch flag must not be one a spec key owns (compiler/_spec/flag_index.py), whether or not the key
    is set: a set key passes it too (slime would see it twice), and an unset one leaves it to the escape hatch, where
    acrl's checks of that key (ACRL-N* for [opd] and [weight_sync], R* for the rollout's keys, the targeted commit's
    facts) never see it. The fix names the key, and the line to write where the flag's words are its value. Nor may
    it be a key's flag under another name (--sglang-cuda-graph-max-bs where acrl passes the replacement of that
    deprecated alias, --sglang-cuda-graph-max-bs-decode; --sglang-dp-size, sglang's other name of
    --sglang-data-parallel-size), repeat MODEL_ARGS, or be a flag acrl derives. Exceptions, where a key passes its
    flag only in some modes and slime needs it in others: :func:`_hatch_may_pass`."""
    if not ctx.spec.extra.flags and not ctx.spec.extra.args:
        return
    commit = ctx.spec.slime.commit
    args = [a for g in ctx.groups for a in g.args if not a.origin.startswith("extra.")]
    derived = {a.flag: a.source for a in args if a.source.kind == "derived"}
    by_key = {a.source.keys[0]: a.source for a in args if a.source.kind != "derived"}  # the keys acrl passes
    passed = {a.flag for a in args}
    absent = known_absent_flags(commit)  # not `or {}`: its truth would read every commit's facts
    for written, key in _escape_hatch(ctx):
        renamed = slime_flag(commit, written)  # a deprecated alias sets what its replacement sets
        owner, flag = key_of(written, commit) or (None, renamed)
        alias = "" if flag == written else f" (a deprecated alias of {flag})" if flag == renamed else \
            f" (sglang's other name for {flag})"
        if flag in ctx.model:
            yield Finding(f"{written}{alias} is already set by model args; slime would see it twice",
                          "set model args instead", keys=(key,))
        elif flag in derived:
            line = _line(owner, _words(ctx, key)) if owner is not None else None
            yield Finding(f"{written}{alias} is already set by {derived[flag].text}; slime would see it twice",
                          "remove it: acrl derives this flag" + (f" (to choose it, set {line})" if line else ""),
                          keys=(key,))
        elif owner is None or _hatch_may_pass(ctx, owner, flag in passed):
            continue
        elif owner.path in by_key or owner.table == "wandb":  # a set [wandb] key: passed with --use-wandb
            source, line = by_key.get(owner.path), _line(owner, _words(ctx, key))
            where = f"[{owner.table}] {owner.key}" + (f" ({source.why})" if source and source.kind == "profile" else "")
            yield Finding(f"{written}{alias} is already set by {where}; slime would see it twice",
                          f"set {line or where} instead", keys=(key,))
        elif absent is None or flag not in absent:  # one the targeted commit lacks: ACRL-F003 names it
            line = _line(owner, _words(ctx, key))
            yield Finding(f"{written}{alias} is the flag of [{owner.table}] {owner.key}: in the escape hatch it "
                          "bypasses acrl's checks of that key (its rules and the targeted commit's flags)",
                          f"set {line or f'[{owner.table}] {owner.key}'} instead", keys=(key,))


def _hatch_may_pass(ctx: Context, owner: FlagKey, passed: bool) -> bool:
    """Keyed flags the escape hatch may pass (``passed``: whether acrl passes the flag), each where its key does not
    pass it and slime may need it all the same:

    - --num-gpus-per-node restating [cluster] gpus_per_node where acrl leaves it out (its placement model says the
      default 8 changes nothing there): slime also seeds each engine with it (random_seed = seed + rank *
      num_gpus_per_node, slime/backends/sglang_utils/sglang_engine.py:530 at 624b824) and counts actors per node by
      it (slime/utils/http_utils.py:270). ACRL-C006 refuses any other value than gpus_per_node.
    - --wandb-project / --wandb-group with their [wandb] key unset: train.sh passes those keys only with --use-wandb
      when the key's variable is set at run time (argv.runtime_args), while slime's W&B runs without a key in offline
      mode (--use-wandb --wandb-mode offline: slime/observability/wandb_utils.py:38-40 at 624b824 logs in only when
      not offline), which a spec can ask for only through the escape hatch."""
    if owner.path == "cluster.gpus_per_node":
        return not passed
    if owner.table == "wandb":
        return getattr(ctx.spec.wandb, owner.key) is None
    return False


def _words(ctx: Context, key: str) -> list[str] | None:
    """The words an escape-hatch flag passes slime (None: none at all, a false value)."""
    if key.startswith("extra.flags."):
        tokens = flag_tokens("--x", ctx.spec.extra.flags[key.removeprefix("extra.flags.")])
        return tokens[1:] if tokens else None
    args = ctx.spec.extra.args
    i = int(key.rsplit(".", 1)[1])
    if "=" in args[i]:
        return [args[i].split("=", 1)[1]]
    return list(itertools.takewhile(lambda t: not (t.startswith("--") and not is_number(t)), args[i + 1:]))


def _line(owner: FlagKey, words: list[str] | None) -> str | None:
    """``[train] lr = 2e-06``: the key set to what the flag's ``words`` pass, where they are its value (a switch's
    false value: false); None where they are not."""
    if words is None:
        value: object = False if owner.kind == "switch" else None
    else:
        try:
            value = coerce(owner, words)
        except CoerceError:
            value = None
    if value is None:
        return None
    from ..._spec.schema import toml_literal  # lazy: only for a finding's fix; the compile path never loads schema

    return f"[{owner.table}] {owner.key} = {toml_literal(value)}"


@rule("ACRL-F003", "error", ["slime.commit", "extra.flags", "model.megatron_to_hf_mode"],
      "flags exist at the targeted slime commit")
def _absent_at_commit(ctx: Context) -> Iterator[Finding]:
    """Flags must exist at the targeted slime commit, for the commits acrl ships facts about (generated from slime's
    and Megatron-LM's code by ``python -m acrl.compiler._slime.flag_facts``; ``acrl`` needs no checkout for it):
    slime ignores an unknown flag silently. A misspelled flag gets its did-you-mean; a flag of another commit says
    since when. Generated ``--sglang-*`` flags are not in the facts."""
    absent = known_absent_flags(ctx.spec.slime.commit)
    if absent is None:
        return
    origins = {a.flag: a.origin for g in ctx.groups for a in g.args}
    found = dict(_escape_hatch(ctx))  # an escape-hatch flag is among the argv's too: once, at its own key
    for flag, key in [*((f, origins[f]) for f in origins if f not in found), *found.items()]:
        if flag in absent:
            spec_key = key if not key.startswith("derived") else "slime.commit"
            close = did_you_mean(flag, ctx.spec.slime.commit)
            yield Finding(f"{flag} does not exist at slime {ctx.spec.slime.commit[:9]} ({absent[flag]}); "
                          "slime would ignore it silently",
                          f"did you mean {close}?" if close else "remove it, or target a slime commit that has it",
                          keys=(spec_key,))


@rule("ACRL-F004", "error", ["extra.flags", "extra.args"], "escape-hatch flags are known to slime")
def _unknown_flags(ctx: Context) -> Iterator[Finding]:
    """When the slime checkout is on the compiling machine, escape-hatch flags must be accepted by its parsers (did-
    you-mean suggested)."""
    if ctx.accepted is None:
        return
    absent = known_absent_flags(ctx.spec.slime.commit)
    for flag, key in _escape_hatch(ctx):
        if absent is not None and flag in absent:
            continue  # ACRL-F003 names it, from the targeted commit's facts
        status, close = ctx.accepted(flag)
        if status == "unknown":
            where = ctx.checked_at or ctx.spec.slime.dir
            yield Finding(f"{flag} is not accepted by slime or Megatron at {where} (slime would ignore it silently)",
                          f"did you mean {close[0]}?" if close else
                          "check the flag's spelling against slime's arguments", keys=(key,))


@rule("ACRL-F005", "error", ["extra.flags", "extra.args"], "no abbreviated sglang flags")
def _abbreviations(ctx: Context) -> Iterator[Finding]:
    """slime's sglang parser accepts abbreviations: --sglang-mem-fraction silently means
    --sglang-mem-fraction-static. An escape-hatch flag that abbreviates a flag acrl passes is an error."""
    emitted = _emitted(ctx)
    facts = sglang_at(ctx.spec.slime.commit) if ctx.spec.extra.flags or ctx.spec.extra.args else None
    for flag, key in _escape_hatch(ctx):
        if not flag.startswith("--sglang-") or flag in emitted or (facts is not None and facts.known(flag)):
            continue  # a flag of its own (argparse takes an exact match over a longer flag)
        longer = sorted(f for f in emitted if f.startswith(flag))
        if longer:
            yield Finding(f"{flag} is an abbreviation of {longer[0]}: slime's sglang parser expands it silently",
                          f"write the full flag through its spec key ({longer[0]})", keys=(key,))


def _sglang_hatch(ctx: Context) -> Iterator[tuple[str, str]]:
    """(flag, spec key) of the escape hatch's --sglang-* flags."""
    return ((flag, key) for flag, key in _escape_hatch(ctx) if flag.startswith("--sglang-"))


@rule("ACRL-F006", "warning", ["extra.flags", "extra.args"], "no sglang flags deprecated at the targeted commit")
def _deprecated_sglang(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch --sglang-* flag that the sglang of the targeted slime commit deprecates (its Deprecated*Action
    arguments: --sglang-cuda-graph-max-bs is --sglang-cuda-graph-max-bs-decode's deprecated alias in sglang
    0.5.15.post1, slime 624b824's image) still works and logs a warning at every engine start; its replacement is
    named."""
    if not ctx.spec.extra.flags and not ctx.spec.extra.args:
        return
    facts = sglang_at(ctx.spec.slime.commit)
    if facts is None:
        return
    for flag, key in _sglang_hatch(ctx):
        deprecation = facts.deprecation(flag)
        if deprecation is not None:
            new, note = deprecation
            if new is not None:
                yield Finding(f"{flag} is deprecated in {facts.shown} for {new}: it still works, with a warning at "
                              "each engine start", f"write {new} instead", keys=(key,))
            else:
                why = f" ({note})" if note else ""
                yield Finding(f"{flag} is deprecated in {facts.shown} and does nothing{why}", "remove it", keys=(key,))


@rule("ACRL-F007", "error", ["extra.flags", "extra.args"], "sglang flags exist at the targeted commit")
def _unknown_sglang(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch --sglang-* flag must be one slime's sglang parser defines at the targeted slime commit: one
    of sglang's ServerArgs flags with slime's prefix, but those slime sets itself and skips (skipped_args:
    --sglang-tp-size at 624b824...), or slime's own (--sglang-router-ip, --sglang-server-concurrency...; slime/
    backends/sglang_utils/arguments.py). That parser ignores any other silently (parse_known_args) and expands an
    abbreviation. Checked only for the commits acrl has sglang facts for."""
    if not ctx.spec.extra.flags and not ctx.spec.extra.args:
        return
    facts = sglang_at(ctx.spec.slime.commit)
    if facts is None:
        return
    emitted = _emitted(ctx)
    for flag, key in _sglang_hatch(ctx):
        if facts.known(flag) or any(f.startswith(flag) for f in emitted):  # ACRL-F005 names the latter
            continue
        longer = facts.expansions(flag)
        if flag in facts.dropped:
            yield Finding(f"{flag}: slime sets sglang's {facts.dropped[flag]} itself and does not define this flag "
                          f"at slime {facts.commit[:9]}; it would be ignored", "remove it", keys=(key,))
        elif longer:
            which = longer[0] if len(longer) == 1 else "one of " + ", ".join(longer[:4])
            yield Finding(f"{flag} is not a flag of {facts.shown} but an abbreviation of {which}: slime's sglang "
                          "parser expands it silently" + ("" if len(longer) == 1 else " (or stops: ambiguous)"),
                          f"write the full flag ({longer[0]})" if len(longer) == 1 else "write the full flag",
                          keys=(key,))
        else:
            close = facts.suggestions(flag)
            yield Finding(f"{flag} is not a flag of {facts.shown}: slime's sglang parser ignores it silently",
                          f"did you mean {close[0]}?" if close else
                          f"check the flag against sglang {facts.version}'s server arguments (with the --sglang- "
                          "prefix)", keys=(key,))
