"""_importers: `acrl import KIND FILE`: ``base`` (the registry of importers by name, the spec
writer, the in-memory compile of the result) and one module per kind (``slime_runner``,
``train_sh`` with ``train_sh_map``), with ``target`` (the slime commit an import targets); the flag -> spec key index
they read flags back with is ``_spec.flag_index``. Imports ``_pipeline``, ``_spec``, ``_slime``, ``_shell``,
``errors``, ``_secrets``; never ``_review``, ``_fast``, ``_cli``.
"""
