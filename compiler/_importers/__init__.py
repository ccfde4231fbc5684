"""_importers: `acrl import KIND FILE`: ``base`` (the registry of importers by name, the spec
writer, the in-memory compile of the result) and one module per kind (``slime_runner``,
``train_sh`` with ``train_sh_map``), with ``flag_index`` (slime flag -> spec key). Imports
``_pipeline``, ``_spec``, ``_shell``, ``errors``, ``_secrets``; never ``_review``, ``_fast``, ``_cli``.
"""
