"""Every adapter has the one instrumentor shape: an Instrumentor subclass with the same public face.

Importing the instrumentor modules imports no framework, so these run without LightRAG, GraphRAG or
LlamaIndex installed.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from triage_plugins.adapter_kit import Instrumentor

ADAPTERS = {
    "lightrag": ("triage_lightrag.instrument", "LightRAGInstrumentor", "lightrag-hku"),
    "graphrag": ("triage_graphrag.instrument", "GraphRAGInstrumentor", "graphrag"),
    "llamaindex": ("triage_llamaindex.instrument", "LlamaIndexInstrumentor", "llama-index-core"),
}
#: what a user of any adapter can count on (OpenInference's shape plus triage's feedback loop)
FACE = ("instrument", "uninstrument", "feedback", "flush", "query", "instrumentation_dependencies")
PROPERTIES = ("manager", "query_id", "is_instrumented", "owns_manager")


def public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(cls, name)) for name in FACE if callable(getattr(cls, name, None))
    }


@pytest.mark.parametrize("framework", sorted(ADAPTERS))
def test_the_adapter_is_an_instrumentor_with_the_shared_face(framework):
    module_name, class_name, distribution = ADAPTERS[framework]
    module = importlib.import_module(module_name)
    cls = getattr(module, class_name)
    assert issubclass(cls, Instrumentor) and not inspect.isabstract(cls)
    assert cls.framework == framework == importlib.import_module(f"triage_{framework}.plugin").FRAMEWORK
    # the same methods with the same signatures as the base: a reader who knows one knows all three
    for name, signature in public(Instrumentor).items():
        if name in ("instrumentation_dependencies",):
            continue
        assert public(cls)[name] == signature, f"{class_name}.{name} departs from Instrumentor.{name}"
    for name in PROPERTIES:
        assert isinstance(inspect.getattr_static(cls, name), property), name
    requirements = cls().instrumentation_dependencies()
    assert any(r.replace(" ", "").startswith(distribution) for r in requirements)
    # the compatible shortcut stays importable from the package
    package = importlib.import_module(f"triage_{framework}")
    assert callable(package.instrument) and package.instrument is module.instrument
    assert getattr(package, class_name) is cls
