"""Jinja templates of the bundle files (package data, loaded by acrl.compiler)."""
