"""_review: the tools that read bundles back: ``view`` (what a bundle's files say), ``shell_files``
(train.sh and model_args.sh, read through ``_shell.lexer`` by ``acrl.templates.train_sh_structure``),
``diff`` (`acrl diff`, `acrl-compile --check`), ``explain`` (`acrl explain`), ``verify`` (manifest
hashes). Imports ``_pipeline``, ``_spec``, ``_shell.lexer``, ``errors`` and
``acrl.templates.train_sh_structure``; never ``_importers``, ``_fast``, ``_cli``.
"""
