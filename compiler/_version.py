"""The acrl version, recorded in every bundle's manifest."""

__version__ = "0.1.0"
