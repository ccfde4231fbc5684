"""ACRL-F*: flags. No argv token passes a credential; the escape hatch ([extra.flags], [extra.args])
neither passes a spec key's flag, set or not, nor abbreviates an sglang flag acrl passes; flags exist at
the targeted slime commit and are known to the slime checkout when it is on the compiling machine, and are
never abbreviations (compiler/_slime/flag_verdict.py: what slime's parsers do with one); its --sglang-* flags
are flags of the sglang the targeted commit runs, and not deprecated there (compiler/_slime/sglang_stack.py);
an escape-hatch flag that none of these can check is named in a warning.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ..._secrets import is_credential_flag
from ..._slime.checkout import missing_hint
from ..._slime.commit_facts import commit_facts, known_commits
from ..._slime.flag_verdict import (
    Abbreviation,
    FlagStatus,
    abbreviation,
    megatron_parser_at,
    registers_router,
    router_at,
    sglang_parser_at,
    sglang_parser_flags,
)
from ..._slime.sglang_stack import sglang_at, slime_flag
from ..._spec.flag_index import CoerceError, FlagKey, coerce, key_of
from ..._spec.flags import did_you_mean, flag_tokens, is_number, known_absent_flags, normalize_flag
from .engine import ARGV, EACH_VALUE, FLAG_TABLES, MODEL_ARGS, Context, Finding, rule, spec_strings


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
      "no credentials in flags", reads=(EACH_VALUE,))
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


@rule("ACRL-F002", "error", ["extra.flags", "extra.args"], "escape hatch does not pass a spec key's flag",
      reads=(ARGV, MODEL_ARGS, "slime.commit"))
def _duplicates(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch flag must not be one a spec key owns (compiler/_spec/flag_index.py), whether or not the key
    is set: a set key passes it too (slime would see it twice), and an unset one leaves it to the escape hatch, where
    acrl's checks of that key (ACRL-N* for [opd] and [weight_sync], R* for the rollout's keys, the targeted commit's
    facts) never see it. The fix names the key, and the line to write where the flag's words are its value. Nor may
    it be a key's flag under another name (--sglang-cuda-graph-max-bs where acrl passes the replacement of that
    deprecated alias, --sglang-cuda-graph-max-bs-decode; --sglang-dp-size, sglang's other name of
    --sglang-data-parallel-size), repeat MODEL_ARGS, or be a flag acrl derives. Exceptions, where a key passes its
    flag only in some modes and slime needs it in others: :func:`_hatch_may_pass`; a flag the targeted commit (or its
    sglang) lacks is ACRL-F003's (F007's) alone."""
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
        if written.startswith("--sglang-") and (facts := sglang_at(commit)) is not None and not facts.known(written):
            continue  # not a flag of the targeted sglang (-decode at v0.3.0): ACRL-F007's alone, as F003's below
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
        value: object = False if owner.kind == "switch" and owner.sets is True else None  # not --no-load-optim's
    else:
        try:
            value = coerce(owner, words)
        except CoerceError:
            value = None
    if value is None:
        return None
    from ..._spec.schema import toml_literal  # lazy: only for a finding's fix; the compile path never loads schema

    return f"[{owner.table}] {owner.key} = {toml_literal(value)}"


def _some(flags: tuple[str, ...] | list[str], last: str = "or", shown: int = 4) -> str:
    """``a``, ``a or b``, ``a, b, c or d``, ``a, b, c, d or 5 more``."""
    if len(flags) > shown:
        return ", ".join(flags[:shown]) + f" {last} {len(flags) - shown} more"
    return flags[0] if len(flags) == 1 else ", ".join(flags[:-1]) + f" {last} {flags[-1]}"


def _abbreviated(a: Abbreviation, key: str) -> Finding:
    """The finding on an abbreviation, by what slime does with it (compiler/_slime/flag_verdict.py)."""
    sglang, megatron = a.parsers
    if a.ambiguous:
        return Finding(f"{a.flag} is an ambiguous abbreviation for slime's sglang parser, which expands abbreviations "
                       f"({sglang}): it could mean {_some(a.sglang)}, so argparse stops and slime exits at start",
                       f"write the full flag ({_some(a.longer)})" if a.longer else "write the full flag", keys=(key,))
    if a.expanded is not None:
        others = [f for f in a.longer if f != a.expanded]
        also = f"; it is also a prefix of {_some(others)}, which slime's main parser does not expand" if others else ""
        return Finding(f"{a.flag} is an abbreviation of {a.expanded}: slime's sglang parser, which expands "
                       f"abbreviations ({sglang}), reads it as {a.expanded} silently{also}",
                       f"write {a.expanded}" if not others else f"write the full flag ({_some(a.longer)})", keys=(key,))
    return Finding(f"{a.flag} is an abbreviation of {_some(a.longer)} that slime's parser does not expand "
                   f"(allow_abbrev=False: {megatron}); slime would ignore it silently",
                   f"write {a.longer[0]}" if len(a.longer) == 1 else f"write the full flag ({_some(a.longer)})",
                   keys=(key,))


def _generated_router(ctx: Context, flag: str) -> bool:
    """A --router-* flag where the targeted commit registers sglang_router's RouterArgs (or acrl cannot tell): made
    at run time, in no facts (ACRL-F008 names it)."""
    return flag.startswith("--router-") and registers_router(ctx.spec.slime.commit) is not False


@rule("ACRL-F003", "error", ["slime.commit", "extra.flags", "model.megatron_to_hf_mode"],
      "flags exist at the targeted slime commit", reads=(ARGV, "extra.args"))
def _absent_at_commit(ctx: Context) -> Iterator[Finding]:
    """Flags must exist at the targeted slime commit, for the commits acrl ships facts about (generated from slime's
    and Megatron-LM's code by ``python -m acrl.compiler._slime.flag_facts``; ``acrl`` needs no checkout for it):
    slime ignores an unknown flag silently. A misspelled flag gets its did-you-mean; a flag of another commit says
    since when; an abbreviation (``--use-ti``) says what slime does with it: its main parser does not expand it
    (allow_abbrev=False), its sglang parser expands it or, where ambiguous, stops. Generated ``--sglang-*`` flags,
    and ``--router-*`` ones where the commit registers them, are not in the facts (ACRL-F008 names them)."""
    commit = ctx.spec.slime.commit
    absent = known_absent_flags(commit)
    facts = commit_facts(commit)
    if absent is None or facts is None:
        return
    families = ("--sglang-", "--router-") if registers_router(commit) is not False else ("--sglang-",)
    parsers = (sglang_parser_at(commit), megatron_parser_at(commit))
    origins = {a.flag: a.origin for g in ctx.groups for a in g.args}
    found = dict(_escape_hatch(ctx))  # an escape-hatch flag is among the argv's too: once, at its own key
    for flag, key in [*((f, origins[f]) for f in origins if f not in found), *found.items()]:
        if flag not in absent or _generated_router(ctx, flag):
            continue
        spec_key = key if not key.startswith("derived") else "slime.commit"
        abbreviated = abbreviation(flag, facts.flags, sglang_parser_flags(facts.flags), families, parsers)
        if abbreviated is not None and not abbreviated.ambiguous and abbreviated.expanded is None and \
                any(flag in c.flags for c in known_commits()):
            abbreviated = None  # a flag of another commit that slime ignores here: named as one (since when)
        if abbreviated is not None:
            yield _abbreviated(abbreviated, spec_key)
            continue
        why = absent[flag] if not flag.startswith("--router-") else \
            f"slime {facts.name} registers no --router-* flags: sglang_router's RouterArgs came later"
        close = did_you_mean(flag, commit)
        yield Finding(f"{flag} does not exist at slime {commit[:9]} ({why}); slime would ignore it silently",
                      f"did you mean {close}?" if close else "remove it, or target a slime commit that has it",
                      keys=(spec_key,))


@rule("ACRL-F004", "error", ["extra.flags", "extra.args"], "escape-hatch flags are known to slime",
      reads=("slime.dir", "slime.megatron_dir"))
def _unknown_flags(ctx: Context) -> Iterator[Finding]:
    """When the slime checkout is on the compiling machine, escape-hatch flags must be accepted by its parsers (did-
    you-mean suggested; an abbreviation named as in ACRL-F003). A flag the checkout's gaps could hide is not refused
    (ACRL-F008 names it)."""
    if ctx.accepted is None:
        return
    absent = known_absent_flags(ctx.spec.slime.commit)
    where = ctx.checked_at or ctx.spec.slime.dir
    for flag, key in _escape_hatch(ctx):
        if absent is not None and flag in absent and not _generated_router(ctx, flag):
            continue  # ACRL-F003 names it, from the targeted commit's facts
        verdict = ctx.accepted(flag)
        if verdict.status is not FlagStatus.UNKNOWN:
            continue
        if verdict.abbreviation is not None:
            yield _abbreviated(verdict.abbreviation, key)  # citing the checkouts' files
        else:
            yield Finding(f"{flag} is not accepted by slime or Megatron at {where} (slime would ignore it silently)",
                          f"did you mean {verdict.suggestions[0]}?" if verdict.suggestions else
                          "check the flag's spelling against slime's arguments", keys=(key,))


@rule("ACRL-F005", "error", ["extra.flags", "extra.args"], "no abbreviated sglang flags", reads=(ARGV, "slime.commit"))
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


@rule("ACRL-F006", "warning", ["extra.flags", "extra.args"], "no sglang flags deprecated at the targeted commit",
      reads=("slime.commit",))
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


@rule("ACRL-F007", "error", ["extra.flags", "extra.args"], "sglang flags exist at the targeted commit",
      reads=(ARGV, "slime.commit"))
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


def _unchecked(ctx: Context, flag: str) -> tuple[str, str] | None:
    """Why nothing could check the escape-hatch ``flag`` (and the fix), or None when something did: the targeted
    commit's facts (ACRL-F003; for --sglang-* flags the facts of its sglang, ACRL-F007) or the checkout (ACRL-F004)
    when it could read the flag's definition or its absence."""
    commit = ctx.spec.slime.commit
    facts = commit_facts(commit)
    reason = None
    if flag.startswith("--sglang-"):
        if sglang_at(commit) is not None or (facts is not None and flag in facts.flags):
            return None
        if facts is not None:
            reason = (f"acrl has no facts of sglang {facts.sglang_version}, which slime {facts.name} runs and makes "
                      "its --sglang-* flags of at run time",
                      f"check each against sglang {facts.sglang_version}'s server arguments (with the --sglang- "
                      "prefix): slime ignores an unknown one silently")
    elif _generated_router(ctx, flag) and facts is not None:
        reason = (f"--router-* flags are made at run time from sglang_router's RouterArgs ({router_at(commit)}), and "
                  "acrl has no facts of them", "check each against sglang_router's arguments (with the --router- "
                  "prefix): slime ignores an unknown one silently")
    elif facts is not None:
        return None
    if ctx.accepted is not None:
        verdict = ctx.accepted(flag)
        if verdict.status is not FlagStatus.UNVERIFIABLE:
            return None
        return reason or (f"the slime checkout at {ctx.checked_at or ctx.spec.slime.dir} cannot say: {verdict.reason}",
                          "check each against slime's and Megatron-LM's arguments; the notes say what could not be "
                          "read")
    shipped = ", ".join(c.name for c in known_commits())
    return reason or (f"acrl has no facts of slime {commit[:12]} and no slime checkout is on this machine; slime "
                      "ignores a flag its parsers do not define, silently",
                      f"{missing_hint('each against its parsers')}; or target a commit acrl has facts for ({shipped})")


@rule("ACRL-F008", "warning", ["extra.flags", "extra.args"], "escape-hatch flags that could not be checked",
      local=True, reads=("slime.commit", "slime.dir", "slime.megatron_dir"))
def _not_checked(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch flag that neither acrl's facts of the targeted commit nor a slime checkout on this machine can
    check is named, by key, with why: a commit acrl has no facts of and no checkout here (every flag), a --sglang-*
    flag where acrl has no facts of the sglang the commit runs, a --router-* flag (made at run time from
    sglang_router), or a flag the checkout's gaps could hide (compiler/_slime/source.py). One warning per reason,
    at the first key. What was checked depends on the machine, so these warnings are shown (and given with --json)
    but never written into manifest.json: the same spec gives the same bytes everywhere."""
    if not ctx.spec.extra.flags and not ctx.spec.extra.args:
        return
    unchecked: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for flag, key in _escape_hatch(ctx):
        reason = _unchecked(ctx, flag)
        if reason is not None:
            unchecked.setdefault(reason, []).append((flag, key))
    for (why, hint), items in unchecked.items():
        named = [key if key.endswith(f".{flag}") else f"{key} ({flag})" for flag, key in items]
        listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + f" and {named[-1]}"
        yield Finding(f"{listed} could not be checked: {why}", hint, keys=tuple(key for _, key in items))
