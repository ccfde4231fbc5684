"""_preflight: the checks `acrl run` makes before anything is launched: ``checks`` (the registry
and the bundle's facts), ``outcome`` (how a check reports), ``aws`` (STS, S3, AgentCore),
``python`` (checks run in the target Python) and ``slime_parser`` (slime's own argument parser).
Imports ``acrl.compiler`` (never the reverse); boto3 and ray only lazily.
"""
