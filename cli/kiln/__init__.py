"""Kiln: stand up GPU clusters and prove they work."""

__version__ = "0.1.0"
