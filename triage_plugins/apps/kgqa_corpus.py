"""A comparison corpus derived from PathQuestion (``triage compare --corpus pq-2h|pq-3h``; #18).

The embedded world has 60 questions; this corpus turns a public KGQA benchmark into documents, so a
framework row is decided by a few hundred questions over a few hundred documents:

- **documents**: one per KB subject, its facts as sentences ``"The nationality of X is Y."``
  (:func:`~triage_plugins.offline.templates.render_kb_fact`, which the offline extractor reads
  back). Every subject on a sampled question's gold path gets its document; other subjects fill up
  to ``n_documents`` (seeded), as distractors.
- **names**: KB ids as names the stand-in LLMs see as a framework's LLM would, words capitalized
  and ``_`` as spaces (``frederica_of_mecklenburg-strelitz`` -> ``Frederica Of
  Mecklenburg-Strelitz``; each ``-`` part capitalized too); entities whose name would not read back are left out, with their facts.
- **questions**: ``n_questions`` PathQuestion questions sampled with ``seed`` among those whose
  gold path is in the kept KB, the topic id replaced by its name, ``" 's"`` written ``"'s"``; gold
  answers, paths and entities use the same names (the one gold-hit rule,
  :func:`~triage_plugins.adapter_kit.runner.gold_hit`, reads either form alike).

The data is read from ``data_dir`` (default: ``$TRIAGE_DATA_DIR``, else ``../shared/data`` beside the
working directory); a missing file is a :class:`~triage_plugins.contract.errors.DatasetError`
naming it.
"""

from __future__ import annotations

import os
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from triage_plugins.adapter_kit.runner import Corpus, Question
from triage_plugins.contract.errors import DatasetError
from triage_plugins.contract.events import Chunk, Gold, Triple
from triage_plugins.datasets import load_kb, load_questions
from triage_plugins.offline.templates import NAME, render_kb_fact

__all__ = ["KGQA_CORPORA", "data_dir", "display_name", "named_question", "pathquestion_corpus"]

#: ``--corpus`` name -> (PathQuestion question file, its KB file)
KGQA_CORPORA: dict[str, tuple[str, str]] = {
    "pq-2h": ("PQ-2H.txt", "2H-kb.txt"),
    "pq-3h": ("PQ-3H.txt", "3H-kb.txt"),
}
_NAME = re.compile(NAME)


def data_dir(explicit: str | Path | None = None) -> Path:
    """Where the shared KGQA data lives: ``explicit``, ``$TRIAGE_DATA_DIR`` or ``../shared/data``."""
    return Path(explicit or os.environ.get("TRIAGE_DATA_DIR") or Path.cwd().parent / "shared" / "data")


def display_name(node_id: str) -> str | None:
    """The name of a KB id as documents and questions write it; ``None`` if it would not read back."""
    name = " ".join("-".join(p[:1].upper() + p[1:] for p in w.split("-")) for w in node_id.split("_") if w)
    return name if name and _NAME.fullmatch(name) else None


def pathquestion_corpus(
    name: str = "pq-2h",
    *,
    seed: int = 0,
    n_questions: int = 200,
    n_documents: int = 300,
    root: str | Path | None = None,
) -> Corpus:
    """The PathQuestion-derived :class:`Corpus` ``name`` (a key of :data:`KGQA_CORPORA`)."""
    if name not in KGQA_CORPORA:
        raise DatasetError(f"unknown KGQA corpus {name!r}; known: {', '.join(KGQA_CORPORA)}")
    if n_questions < 1 or n_documents < 1:
        raise DatasetError(
            f"n_questions and n_documents must be at least 1, got {n_questions}, {n_documents}"
        )
    folder = data_dir(root) / "pathquestion"
    qa_file, kb_file = (folder / f for f in KGQA_CORPORA[name])
    for file in (qa_file, kb_file):
        if not file.is_file():
            raise DatasetError(f"{file}: not found (set TRIAGE_DATA_DIR to the folder holding pathquestion/)")
    kb = [t for t in load_kb(kb_file) if display_name(t.subject) and display_name(t.object)]
    kept = {t.id for t in kb}
    items = [
        item
        for item in load_questions(qa_file, kb=kb)
        if item.gold_paths and all(t.id in kept for path in item.gold_paths for t in path)
    ]
    rng = random.Random(f"{name}/{seed}")
    items = sorted(rng.sample(items, min(n_questions, len(items))), key=lambda q: q.id)
    by_subject: dict[str, list[Triple]] = defaultdict(list)
    for t in kb:
        by_subject[t.subject].append(t)
    needed = {t.subject for item in items for path in item.gold_paths for t in path}
    others = sorted(set(by_subject) - needed)
    rng.shuffle(others)
    subjects = sorted(needed) + sorted(others[: max(0, n_documents - len(needed))])
    chunks = tuple(_document(subject, by_subject[subject]) for subject in subjects)
    questions = tuple(
        named_question(item.id, item.text, item.topic_entities, item.answers, item.gold_paths) for item in items
    )
    from triage_plugins.offline.extractor import extract_chunk

    return Corpus(f"{name} (seed {seed}, {len(chunks)} documents)", chunks, questions, None, extract_chunk)


def _document(subject: str, facts: Sequence[Triple]) -> Chunk:
    name = display_name(subject) or subject
    text = " ".join(render_kb_fact(name, t.predicate, display_name(t.object) or t.object) for t in facts)
    return Chunk(f"{subject}#p0", subject, text, {"paragraph": 0, "section": name})


def named_question(
    qid: str,
    text: str,
    topics: Sequence[str],
    answers: Iterable[str],
    paths: Sequence[Sequence[Triple]],
) -> Question:
    """A PathQuestion item as the corpus names it: KB ids in ``text``, answers, paths and entities
    replaced by their display names (:func:`display_name`)."""
    for topic in topics:
        text = re.sub(rf"(?<![\w-]){re.escape(topic)}(?![\w-])", display_name(topic) or topic, text)
    text = text.replace(" 's", "'s").replace(" ?", "?").strip()
    text = text[:1].upper() + text[1:]
    named = tuple(tuple(Triple.of(_n(t.subject), t.predicate, _n(t.object)) for t in path) for path in paths)
    gold = Gold(answers=tuple(_n(a) for a in answers), paths=named, entities=tuple(_n(e) for e in topics))
    return Question(qid, text, gold)


def _n(node_id: str) -> str:
    return display_name(node_id) or node_id
