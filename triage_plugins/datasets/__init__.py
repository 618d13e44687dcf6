"""Loaders for KGQA benchmarks: PathQuestion and MetaQA KBs and question files (auto-detected)."""

from triage_plugins.datasets.kb import (
    KBIndex,
    LoadReport,
    Malformed,
    TripleList,
    detect_kb_format,
    iter_kb,
    load_kb,
)
from triage_plugins.datasets.qa import (
    MetaQAAnnotation,
    QAItem,
    QASet,
    detect_qa_format,
    load_metaqa_annotations,
    load_questions,
)

__all__ = [
    "KBIndex",
    "LoadReport",
    "Malformed",
    "MetaQAAnnotation",
    "QAItem",
    "QASet",
    "TripleList",
    "detect_kb_format",
    "detect_qa_format",
    "iter_kb",
    "load_kb",
    "load_metaqa_annotations",
    "load_questions",
]
