"""_fast: every cache: ``cache`` (compile results, help text) and ``template_cache`` (compiled
Jinja templates). Used by the command line's front door (``_cli.front``, ``_cli.help``); the
renderer reaches ``template_cache`` only through ``_pipeline.render.environment``. Imports
``_version`` only.
"""
