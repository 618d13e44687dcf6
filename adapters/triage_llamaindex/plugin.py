"""Entry-point plugin of the llamaindex adapter (group ``triage``).

Imports nothing from the framework, so ``triage plugins`` can list it cheaply.
"""

from __future__ import annotations

FRAMEWORK = "llamaindex"
