"""Compiled templates, kept between runs in the user's cache directory.

Lexing, parsing and compiling the bundle templates is ~10 ms of every compile; loading them from
$XDG_CACHE_HOME/acrl/templates (default ~/.cache/acrl/templates) is ~0.5 ms. The cache can never
change a byte of a bundle:

- What Jinja compiles a template into depends on its source, Jinja and Python, the environment's
  syntax options and its custom filters and tests (Jinja applies them to constants at compile
  time). The source is Jinja's checksum, checked on every load; all the rest is in the file name,
  so an entry is only ever read by an environment that would compile the same code.
- Each file holds the sha256 of its content: a truncated or corrupt file is compiled anew and
  replaced. Files are written to a temporary name and renamed, so concurrent compiles read the
  old file or the new one, never half of one.
- A directory that cannot be created, is not the user's own or is writable by others (anyone
  could plant code there), and any error reading or writing a file, just mean no cache.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import sys
import tempfile
import types
from collections.abc import Iterator
from typing import Any

import jinja2
import jinja2.bccache

from .cache import cache_directory

# False inside read_only(): compiled templates are read, never written (`acrl-compile --check` writes nothing).
# A context variable, set and reset by read_only() alone: no module global is flipped, and a compile in
# another thread (or after the `with`, even one left by an exception) writes as usual.
_WRITABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("acrl_template_cache_writable", default=True)


@contextlib.contextmanager
def read_only() -> Iterator[None]:
    """Inside the ``with``, this context's compiles keep no compiled template (the front door's --check)."""
    token = _WRITABLE.set(False)
    try:
        yield
    finally:
        _WRITABLE.reset(token)


def _code_of(function: Any) -> bytes:
    """What a function does, as bytes; its repr (with an address: never the same twice) if it has no code."""
    code = getattr(function, "__code__", None)
    return repr(_code_key(code)).encode() if isinstance(code, types.CodeType) else repr(function).encode()


def _code_key(code: types.CodeType) -> tuple[Any, ...]:
    """A code object's bytecode, names and constants (nested code included). Not marshal.dumps: its bytes depend on
    reference counts (an object referenced elsewhere is written as a back-reference), which other code in the
    process changes, so the same function could get another cache key."""
    consts = tuple(_code_key(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
                   for c in code.co_consts)
    return (code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
            code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)


class TemplateCache(jinja2.FileSystemBytecodeCache):
    """Jinja's file-system bytecode cache, keyed by everything the compiled code depends on."""

    def __init__(self, directory: str, fingerprint: str) -> None:
        super().__init__(directory, pattern="%s.jinja-code")
        self.fingerprint = fingerprint

    @classmethod
    def open(cls, env: jinja2.Environment) -> TemplateCache | None:
        """The cache for ``env`` in the user's cache directory, or None where there can be none."""
        directory = cache_directory("templates")
        if directory is None:
            return None
        syntax = (env.block_start_string, env.block_end_string, env.variable_start_string,
                  env.variable_end_string, env.comment_start_string, env.comment_end_string,
                  env.line_statement_prefix, env.line_comment_prefix, env.trim_blocks, env.lstrip_blocks,
                  env.newline_sequence, env.keep_trailing_newline, env.autoescape, env.optimized,
                  _code_of(env.finalize) if env.finalize else None, env.is_async, sorted(env.extensions))
        custom = sorted((kind, name, _code_of(function))
                        for kind, functions, defaults in (("filter", env.filters, jinja2.filters.FILTERS),
                                                          ("test", env.tests, jinja2.tests.TESTS))
                        for name, function in functions.items() if function is not defaults.get(name))
        material = repr((sys.version, sys.flags.optimize, jinja2.__version__, syntax, custom)).encode()
        return cls(directory, hashlib.sha256(material).hexdigest())

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        return hashlib.sha256(f"{self.fingerprint}|{name}|{filename}".encode()).hexdigest()

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            with open(self._get_cache_filename(bucket), "rb") as f:
                data = f.read()
        except OSError:
            return
        digest, payload = data[:32], data[32:]
        if hashlib.sha256(payload).digest() != digest:
            return
        try:
            bucket.bytecode_from_string(payload)  # checks Jinja's magic and the source checksum
        except Exception:  # hashes right but does not load (another program's file): compile instead
            bucket.reset()
        if not isinstance(bucket.code, types.CodeType):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if not _WRITABLE.get():
            return
        payload = bucket.bytecode_to_string()
        try:
            fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(hashlib.sha256(payload).digest() + payload)
                os.replace(temporary, self._get_cache_filename(bucket))
            except OSError:
                os.unlink(temporary)
                raise
        except OSError:
            pass
