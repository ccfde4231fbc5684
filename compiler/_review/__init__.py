"""_review: the tools that read bundles back: ``view`` (what a bundle's files say), ``diff``
(`acrl diff`, `acrl-compile --check`), ``explain`` (`acrl explain`), ``verify`` (manifest hashes).
Imports ``_pipeline``, ``_spec`` and ``errors``; never ``_importers``, ``_fast``, ``_cli``.
"""
