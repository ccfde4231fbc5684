"""_cli: the command lines. ``main`` (`acrl-compile` and the compiler's `acrl` commands: parsing and
dispatch), ``front`` (the front door: ``compile_to`` and ``check_to``, the only users of the caches),
``compile_cmd`` and ``commands`` (the handlers: options in, one call, print), ``help`` (--help),
``output`` (exit statuses, JSON) and ``docs`` (`python -m acrl.compiler._cli.docs`, the generated
documentation). May import every other sub-package, lazily where `--help` must stay light or a
compile-cache hit must not load the pipeline; nothing imports it except ``acrl.runtime._cli``.
"""
