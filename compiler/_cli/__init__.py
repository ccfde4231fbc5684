"""_cli: the command lines: ``main`` (`acrl-compile` and the compiler's `acrl` commands; thin, one
library call each), ``sweep`` (`acrl-compile SWEEP.toml`) and ``docs`` (`python -m
acrl.compiler._cli.docs`, the generated documentation). May import every other sub-package, lazily
where `--help` must stay light; nothing imports it except ``acrl.runtime._cli``.
"""
