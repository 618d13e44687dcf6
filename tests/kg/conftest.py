"""Fixtures of the grounding tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def legacy_grounding() -> ModuleType:
    """``legacy_grounding.py`` beside this file: the frozen reference grounder (dict-of-dicts trie)."""
    path = Path(__file__).with_name("legacy_grounding.py")
    spec = importlib.util.spec_from_file_location("legacy_grounding", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
