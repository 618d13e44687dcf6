"""triage-plugins adapter for lightrag (filled by its own issue).

The framework is imported lazily, only inside this package's functions.
"""
