"""validate: stage 4, the cross-field rules (``rules``: the engine and every ACRL-* rule, kept in
one module) and the GPU-memory estimate the ACRL-M rules use (``memory``). Imports ``_spec``,
``_pipeline`` stages before it (parse, argv, model_args), ``errors`` and ``_secrets``.
"""
