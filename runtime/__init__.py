"""acrl.runtime: the executor that runs a compiled bundle (see issue 5).

Depends on acrl.compiler, never the reverse; imports ray and boto3 lazily.
"""

__all__: list[str] = []
