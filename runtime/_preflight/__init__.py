"""_preflight: the checks `acrl run` makes before anything is launched: ``checks`` (the registry
and the bundle's facts), ``outcome`` (how a check reports), ``aws`` (STS, S3, AgentCore),
``python`` (checks run in the target Python), ``slime_parser`` (slime's own argument parser), ``engines``
/ ``engine_probe`` (the external SGLang engines answer what slime asks them first) and ``opd_teacher`` (the
Megatron OPD teacher is a checkpoint Megatron loads).
Imports ``acrl.compiler`` (never the reverse); boto3 and ray only lazily.
"""
