"""One exception hierarchy for the whole project.

Every error the core raises on purpose is a :class:`TriageError`; catch that to catch them all.
Messages say what was wrong and what to do about it.
"""

from __future__ import annotations


class TriageError(Exception):
    """Base class of every error raised on purpose by triage-plugins."""


class EventError(TriageError, ValueError):
    """An event (or a value inside one) is malformed.

    The message starts with ``<EventClass>.<field>:`` so the offending field is named.
    """

    def __init__(self, where: str, field: str, why: str) -> None:
        self.where = where
        self.field = field
        self.why = why
        super().__init__(f"{where}.{field}: {why}")


class OntologyError(TriageError, ValueError):
    """An ontology file or mapping is malformed (the message names the key and the fix)."""


class StoreError(TriageError):
    """The trace/score store cannot be opened, migrated or written."""


class ConfigError(TriageError, ValueError):
    """A configuration value (environment variable, CLI option, threshold) is invalid."""


class DatasetError(TriageError, ValueError):
    """A dataset file is malformed; the message gives the file, line number and reason."""


class FeedbackError(TriageError, ValueError):
    """Invalid input to the feedback learner (an empty path, a utility outside [-1, 1] ...)."""


class JudgeOutputError(FeedbackError):
    """An LLM judge's answer is not the JSON the prompt asked for; the message says what is wrong."""
