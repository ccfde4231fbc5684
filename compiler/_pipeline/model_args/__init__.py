"""model_args: stage 3b, MODEL_ARGS resolved at compile time and frozen with provenance: from
the built-in catalog (``catalog``) or a checkpoint's config.json (``hf_config``), by ``resolve``.
Imports ``_spec`` and ``_pipeline.bundle`` (bounded reads) only.
"""
