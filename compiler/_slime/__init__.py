"""_slime: what acrl reads, statically, from slime and Megatron-LM checkouts on the compiling
machine (``checkout``: which checkouts, given by --slime-checkout / ACRL_SLIME_CHECKOUT apart from the cluster's
[slime] dir; ``source``, scanning with ``scan``, ``scan_patterns`` and ``scan_fields``), the verdict on a flag and
what slime's parsers do with an abbreviated one (``flag_verdict``), and the check of the bundle's flags against them
(``verify_flags``);
``model_facts``, never imported by the compile path, generates the tests' slime facts (tests/data/slime);
``flag_facts`` generates the flags each slime commit accepts (commits/<commit>.json), which ``commit_facts`` reads
at compile time.
Imports ``_spec``, ``_pipeline.bundle`` (bounded reads) and ``_pipeline.model_args``; never
``_review``, ``_importers``, ``_cli``.
"""
