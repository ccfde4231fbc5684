"""_shell: the subset of bash launch scripts are written in, read and never run: ``lexer`` (words)
and ``eval`` (an honest evaluator). Used only by ``_importers``; imports ``_spec.flags``,
``_secrets`` and ``_importers.base`` (the importers' error type).
"""
