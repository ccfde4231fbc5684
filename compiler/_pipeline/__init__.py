"""_pipeline: the pure stages, spec file -> bundle: parse, structure, layers, model_args/, argv,
validate/, render, bundle (manifest hash, atomic write), compile (the chain), sweep. Imports
``_spec``, ``_slime``, ``errors``, ``_secrets``, ``_version`` and, for compiled templates,
``_fast.template_cache``; never ``_review``, ``_importers``, ``_shell``, ``_cli``, ``acrl.runtime``.
"""
