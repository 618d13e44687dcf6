"""Question files of KGQA benchmarks (PathQuestion, MetaQA), auto-detected.

- **PathQuestion** (Zhou et al., COLING 2018): ``question \\t answer(ans1/ans2/…) \\t
  s#r1#e1#r2#…#answer#<end>#answer``; PQL lines lack the ``#<end>#answer`` tail and may start with a
  space. The gold path is in the line; the topic entity is its first node.
- **MetaQA** (Zhang et al., AAAI 2018): ``question with [topic] \\t a1|a2``. The relation path comes
  from the annotated JSONL of ``shared/data/metaqa/derived`` (``annotations=``), joined on its
  ``line`` field; with a KB, the gold paths are the walks of that relation path from the topic that
  end on a gold answer (gold answers never include the topic; intermediate nodes are not filtered,
  since the KB merges a film and a person of the same name, e.g. "Antwone Fisher").

Malformed lines raise :class:`~triage_plugins.contract.errors.DatasetError` (file, line number, reason), or
with ``strict=False`` are skipped, counted in the :class:`~triage_plugins.datasets.kb.LoadReport`
and logged: nothing is dropped silently.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from triage_plugins.contract.errors import DatasetError
from triage_plugins.contract.events import Gold, Triple
from triage_plugins.datasets.kb import KBIndex, LoadReport, Malformed

__all__ = [
    "MetaQAAnnotation",
    "QAItem",
    "QASet",
    "detect_qa_format",
    "load_metaqa_annotations",
    "load_questions",
]

log = logging.getLogger("triage.datasets.qa")

QAFormat = Literal["pathquestion", "metaqa"]
PathLike = str | Path

_BRACKET = re.compile(r"\[([^\[\]]+)\]")
_HOP_DIR = re.compile(r"(\d+)-hop")
MAX_GOLD_PATHS = 200


@dataclass(frozen=True, slots=True)
class QAItem:
    """One benchmark question.

    :param id: stable id (``"<file stem>-<0-based line>"``, or the annotation's id).
    :param answers: gold answer node ids.
    :param topic_entities: the question's topic entity node ids.
    :param gold_paths: gold reasoning paths (topic -> answer), each a sequence of triples.
    :param hops: number of relations asked for, when known.
    :param meta: format-specific extras (``line``, ``answer``, ``qtype``, ``rel_path``,
        ``answerable_exact``, ``gold_path_in_kb`` ...).
    """

    id: str
    text: str
    answers: tuple[str, ...]
    topic_entities: tuple[str, ...]
    gold_paths: tuple[tuple[Triple, ...], ...] = ()
    hops: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def gold(self) -> Gold:
        """The :class:`~triage_plugins.contract.events.Gold` of this question."""
        return Gold(answers=self.answers, paths=self.gold_paths, entities=self.topic_entities)


class QASet(list[QAItem]):
    """A list of questions with the :class:`LoadReport` of how it was loaded."""

    report: LoadReport


@dataclass(frozen=True, slots=True)
class MetaQAAnnotation:
    """One row of a MetaQA ``*_annotated.jsonl`` file."""

    id: str
    line: int
    topic: str
    qtype: str
    hops: int
    rel_path: tuple[tuple[str, str], ...]
    answerable_exact: bool
    raw: Mapping[str, Any]


def detect_qa_format(path: PathLike) -> QAFormat:
    """``"pathquestion"`` or ``"metaqa"``, from the file's first non-blank line."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            if line.lstrip().startswith("{"):
                raise DatasetError(
                    f"{path}:{number}: this is a JSONL annotation file, not a question file; pass it as "
                    f"load_questions(<qa file>, annotations={str(path)!r})"
                )
            cols = line.split("\t")
            if len(cols) == 3 and "#" in cols[2]:
                return "pathquestion"
            if len(cols) == 2 and _BRACKET.search(cols[0]):
                return "metaqa"
            raise DatasetError(
                f"{path}:{number}: cannot tell the question format: expected PathQuestion "
                f"'question<TAB>answer(a/b/)<TAB>s#r#…#answer' or MetaQA 'question with [topic]<TAB>a|b', "
                f"got {line[:120]!r}"
            )
    raise DatasetError(f"{path}: the file is empty")


def _parse_pathquestion(line: str) -> tuple[str, tuple[str, ...], str, tuple[Triple, ...]] | str:
    cols = line.split("\t")
    if len(cols) != 3:
        return f"expected 3 tab-separated fields, got {len(cols)}"
    question, answer_col, path_col = (c.strip() for c in cols)
    if not question:
        return "empty question"
    if "(" in answer_col:
        if not answer_col.endswith(")"):
            return "answer field must look like 'answer(a1/a2/)'"
        main, _, inner = answer_col.partition("(")
        answers = [a.strip() for a in inner[:-1].split("/") if a.strip()]
        main = main.strip()
    else:
        main, answers = answer_col, []
    if not main:
        return "empty answer"
    if main not in answers:
        answers.insert(0, main)
    items = [i.strip() for i in path_col.split("#")]
    if "<end>" in items:
        items = items[: items.index("<end>")]
    if len(items) < 3 or len(items) % 2 == 0 or not all(items):
        return f"gold path must be 'subject#relation#entity[#relation#entity…]', got {path_col[:80]!r}"
    triples = tuple(
        Triple(f"{items[i]}|{items[i + 1]}|{items[i + 2]}", items[i], items[i + 1], items[i + 2])
        for i in range(0, len(items) - 2, 2)
    )
    return question, tuple(answers), main, triples


def _parse_metaqa(line: str) -> tuple[str, str, tuple[str, ...]] | str:
    cols = line.split("\t")
    if len(cols) != 2:
        return f"expected 2 tab-separated fields, got {len(cols)}"
    question, answer_col = cols[0].strip(), cols[1].strip()
    topics = _BRACKET.findall(question)
    if len(topics) != 1:
        return f"expected exactly one [topic entity] in the question, found {len(topics)}"
    answers = tuple(dict.fromkeys(a.strip() for a in answer_col.split("|") if a.strip()))
    if not answers:
        return "no answer"
    return question, topics[0].strip(), answers


def load_metaqa_annotations(path: PathLike) -> dict[int, MetaQAAnnotation]:
    """The rows of a MetaQA annotated JSONL file, keyed by their ``line`` (0-based)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    rows: dict[int, MetaQAAnnotation] = {}
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
                rel_path = tuple((str(r), str(d)) for r, d in data["rel_path"])
                if any(d not in ("+", "-") for _, d in rel_path):
                    raise ValueError("rel_path directions must be '+' or '-'")
                row = MetaQAAnnotation(
                    id=str(data["id"]),
                    line=int(data["line"]),
                    topic=str(data["topic"]),
                    qtype=str(data.get("qtype", "")),
                    hops=int(data.get("hops", len(rel_path))),
                    rel_path=rel_path,
                    answerable_exact=bool(data.get("answerable_exact", False)),
                    raw=MappingProxyType(data),
                )
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                what = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
                raise DatasetError(f"{path}:{number}: malformed annotation: {what}") from None
            if row.line in rows:
                raise DatasetError(f"{path}:{number}: annotation for line {row.line} appears twice")
            rows[row.line] = row
    return rows


def load_questions(
    path: PathLike,
    *,
    kb: Iterable[Triple] | KBIndex | None = None,
    annotations: PathLike | Mapping[int, MetaQAAnnotation] | None = None,
    strict: bool = True,
    format: QAFormat | None = None,
) -> QASet:
    """Load a PathQuestion or MetaQA question file (format auto-detected); ``.report`` tells what was read.

    :param kb: the KB (triples or a :class:`KBIndex`): PathQuestion gold paths are checked against it
        (``meta["gold_path_in_kb"]``); MetaQA gold paths are walked in it (needs ``annotations``).
    :param annotations: MetaQA only: the annotated JSONL (path or :func:`load_metaqa_annotations`
        result), giving ``rel_path``, ``qtype``, ``hops`` and ``answerable_exact`` per line.
    :param strict: raise on the first malformed line (default); otherwise skip and count it.
    """
    path = Path(path)
    fmt = format or detect_qa_format(path)
    index = kb if isinstance(kb, KBIndex) or kb is None else KBIndex(kb)
    if annotations is not None and fmt != "metaqa":
        raise DatasetError(f"{path}: annotations= only applies to MetaQA question files")
    notes = load_metaqa_annotations(annotations) if isinstance(annotations, str | Path) else annotations
    report = LoadReport(files=[str(path)])
    out = QASet()
    hop_dir = _HOP_DIR.search(path.parent.name)
    dir_hops = int(hop_dir.group(1)) if hop_dir else None
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            report.lines += 1
            line = raw.rstrip("\r\n")
            if not line.strip():
                report.blank += 1
                continue
            index0 = number - 1
            if fmt == "pathquestion":
                item = _pathquestion_item(path, index0, line, index)
            else:
                item = _metaqa_item(path, index0, line, index, notes, dir_hops)
            if isinstance(item, str):
                bad = Malformed(str(path), number, item, line)
                if strict:
                    raise DatasetError(str(bad))
                report.malformed.append(bad)
                continue
            out.append(item)
    report.loaded = len(out)
    out.report = report
    if report.malformed:
        log.warning("questions loaded with malformed lines skipped: %s", report)
    return out


def _pathquestion_item(path: Path, index0: int, line: str, kb: KBIndex | None) -> QAItem | str:
    parsed = _parse_pathquestion(line)
    if isinstance(parsed, str):
        return parsed
    question, answers, main, triples = parsed
    meta: dict[str, Any] = {"line": index0, "answer": main, "format": "pathquestion"}
    if kb is not None:
        meta["gold_path_in_kb"] = all(t.id in kb for t in triples)
    return QAItem(
        id=f"{path.stem}-{index0}",
        text=question,
        answers=answers,
        topic_entities=(triples[0].subject,),
        gold_paths=(triples,),
        hops=len(triples),
        meta=MappingProxyType(meta),
    )


def _metaqa_item(
    path: Path,
    index0: int,
    line: str,
    kb: KBIndex | None,
    notes: Mapping[int, MetaQAAnnotation] | None,
    dir_hops: int | None,
) -> QAItem | str:
    parsed = _parse_metaqa(line)
    if isinstance(parsed, str):
        return parsed
    question, topic, answers = parsed
    meta: dict[str, Any] = {"line": index0, "format": "metaqa"}
    item_id, hops, gold_paths = f"{path.stem}-{index0}", dir_hops, ()
    if notes is not None:
        note = notes.get(index0)
        if note is None:
            return "no annotation for this line"
        if note.topic != topic:
            return f"annotation topic {note.topic!r} differs from the question's [{topic}] (wrong annotation file?)"
        item_id, hops = note.id, note.hops
        meta.update(
            qtype=note.qtype,
            rel_path=note.rel_path,
            answerable_exact=note.answerable_exact,
            topic_in_kb=bool(note.raw.get("topic_in_kb", True)),
        )
        if kb is not None:
            gold = set(answers)
            walks = kb.walk(topic, note.rel_path, exclude_visited=False)
            walked = [p for p in walks if _end(p, topic, note.rel_path) in gold]
            meta["gold_paths_truncated"] = len(walked) > MAX_GOLD_PATHS
            gold_paths = tuple(walked[:MAX_GOLD_PATHS])
    return QAItem(
        id=item_id,
        text=question,
        answers=answers,
        topic_entities=(topic,),
        gold_paths=gold_paths,
        hops=hops,
        meta=MappingProxyType(meta),
    )


def _end(path: Sequence[Triple], start: str, rel_path: Sequence[tuple[str, str]]) -> str:
    node = start
    for t, (_, direction) in zip(path, rel_path, strict=True):
        node = t.object if direction == "+" else t.subject
    return node
