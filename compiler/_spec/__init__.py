"""_spec: the spec's data model. The frozen attrs classes of the TOML tables (``tables``), their
JSON Schema (``schema``) and the flag metadata that turns spec values into slime argv tokens
(``flags``). Imports only ``errors`` and ``_secrets`` at module level (``schema`` reaches
``_pipeline.render`` lazily, for one function); never ``_review``, ``_importers``, ``_fast``, ``_cli``.
"""
