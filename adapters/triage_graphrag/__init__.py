"""triage-plugins adapter for graphrag (filled by its own issue).

The framework is imported lazily, only inside this package's functions.
"""
