"""_shell: the subset of bash launch scripts are written in, read and never run: ``lexer`` (words),
acrl's one bash reader, used by ``_importers`` (through ``eval``) and by ``_review.shell_files`` (a
bundle's train.sh and model_args.sh); ``eval`` (an honest evaluator, for the importers), with
``substitution`` (the output of ``seq``, ``basename`` and ``dirname``, computed). The lexer and
``substitution`` import nothing of acrl; ``eval`` imports ``_spec.flags``, ``_secrets`` and
``_importers.base`` (the importers' error type).
"""
