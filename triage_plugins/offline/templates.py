"""Schema and sentence templates of the synthetic world (DESIGN §5).

One table drives both directions: :mod:`triage_plugins.offline.world` renders facts with
:meth:`Template.render`, and :mod:`triage_plugins.offline.extractor` reads sentences back with
:meth:`Template.match`, whose regular expression is derived from the same pattern string. A
template therefore cannot be added to one side and forgotten on the other.

Names in the world are sequences of capitalised words (no periods, commas or lower-case words), so
a sentence splits on ``. `` and a name is ``[A-Z0-9][\\w'&-]*( [A-Z0-9][\\w'&-]*)*``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "KB_ENTITY_TYPE",
    "RELATIONS",
    "TEMPLATES",
    "NOISE_PREDICATES",
    "RelationSpec",
    "Template",
    "match_kb_fact",
    "render_kb_fact",
    "templates_for",
]

StatementKind = Literal["fact", "outdated", "dangling", "irrelevant"]

NAME = r"[A-Z0-9][\w'&-]*(?: [A-Z0-9][\w'&-]*)*"
LOWER_PHRASE = r"[a-z]+(?: [a-z]+)*"


@dataclass(frozen=True, slots=True)
class RelationSpec:
    """Domain, range and cardinality of a world relation (used for the ontology too)."""

    name: str
    domain: str
    range: str
    functional: bool = False
    symmetric: bool = False
    max_cardinality: int | None = None


RELATIONS: dict[str, RelationSpec] = {
    spec.name: spec
    for spec in (
        RelationSpec("born_in", "Person", "City", functional=True),
        RelationSpec("nationality", "Person", "Country", functional=True),
        RelationSpec("spouse", "Person", "Person", functional=True, symmetric=True),
        RelationSpec("parents", "Person", "Person", max_cardinality=2),
        RelationSpec("works_for", "Person", "Organisation", functional=True),
        RelationSpec("founded_by", "Organisation", "Person", max_cardinality=2),
        RelationSpec("headquartered_in", "Organisation", "City", functional=True),
        RelationSpec("located_in", "City", "Country", functional=True),
        RelationSpec("directed_by", "Film", "Person", max_cardinality=2),
        RelationSpec("written_by", "Film", "Person", max_cardinality=3),
        RelationSpec("starred_actors", "Film", "Person"),
        RelationSpec("produced_by", "Film", "Organisation", functional=True),
        RelationSpec("release_year", "Film", "Year", functional=True),
        RelationSpec("has_genre", "Film", "Genre", functional=True),
    )
}

# Predicates that only noise statements produce (not part of the world's schema).
NOISE_PREDICATES: dict[str, tuple[str, str]] = {
    "knows": ("Person", "Person"),
    "hobby": ("Person", "Activity"),
    "has_pet": ("Person", "Animal"),
}


@dataclass(frozen=True, slots=True)
class Template:
    """A sentence pattern with ``{s}`` and ``{o}`` slots for one predicate.

    :param predicate: the relation the sentence states.
    :param pattern: the sentence, e.g. ``"{s} was directed by {o}."``.
    :param kind: ``"fact"`` (a current fact), ``"outdated"`` (a former value that conflicts with the
        current one), ``"dangling"`` (mentions a name that is not an entity of the world) or
        ``"irrelevant"`` (true but outside the schema).
    :param object_regex: how the object slot reads back (names by default).
    """

    predicate: str
    pattern: str
    subject_type: str
    object_type: str
    kind: StatementKind = "fact"
    object_regex: str = NAME
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = re.split(r"(\{s\}|\{o\})", self.pattern)
        out = []
        for part in parts:
            if part == "{s}":
                out.append(f"(?P<s>{NAME})")
            elif part == "{o}":
                out.append(f"(?P<o>{self.object_regex})")
            else:
                out.append(re.escape(part))
        object.__setattr__(self, "regex", re.compile("".join(out)))

    def render(self, subject: str, obj: str) -> str:
        """The sentence stating ``(subject, predicate, obj)``."""
        return self.pattern.format(s=subject, o=obj)

    def match(self, sentence: str) -> tuple[str, str] | None:
        """``(subject, object)`` when ``sentence`` is exactly this template, else ``None``."""
        m = self.regex.fullmatch(sentence)
        return None if m is None else (m.group("s"), m.group("o"))


def _facts(predicate: str, *patterns: str, object_regex: str = NAME) -> list[Template]:
    spec = RELATIONS[predicate]
    return [Template(predicate, p, spec.domain, spec.range, "fact", object_regex) for p in patterns]


TEMPLATES: tuple[Template, ...] = tuple(
    [
        *_facts("born_in", "{s} was born in {o}.", "{o} is the birthplace of {s}."),
        *_facts("nationality", "{s} is a citizen of {o}.", "{s} holds the citizenship of {o}."),
        *_facts("spouse", "{s} is married to {o}.", "{s} and {o} are married."),
        *_facts("parents", "{o} is a parent of {s}.", "{s} is a child of {o}."),
        *_facts("works_for", "{s} works for {o}.", "{s} is employed by {o}."),
        *_facts("founded_by", "{s} was founded by {o}.", "{o} founded {s}."),
        *_facts("headquartered_in", "{s} is headquartered in {o}.", "{s} has its headquarters in {o}."),
        *_facts("located_in", "{s} is a city in {o}.", "{s} lies in {o}."),
        *_facts("directed_by", "{s} was directed by {o}.", "{o} directed {s}."),
        *_facts("written_by", "{s} was written by {o}.", "{o} wrote the screenplay of {s}."),
        *_facts("starred_actors", "{o} starred in {s}.", "{s} features {o} in a leading role."),
        *_facts("produced_by", "{s} was produced by {o}.", "{o} produced {s}."),
        *_facts("release_year", "{s} was released in {o}.", "{s} premiered in {o}.", object_regex=r"\d{4}"),
        *_facts("has_genre", "{s} is a {o} film.", "{s} belongs to the {o} genre."),
        # Outdated values of functional relations: read back as the same predicate, so the
        # conflict with the current value reaches the graph (as it does with a real extractor).
        Template("works_for", "{s} formerly worked for {o}.", "Person", "Organisation", "outdated"),
        Template("spouse", "{s} was previously married to {o}.", "Person", "Person", "outdated"),
        Template("nationality", "{s} formerly held the citizenship of {o}.", "Person", "Country", "outdated"),
        Template(
            "headquartered_in", "{s} was formerly headquartered in {o}.", "Organisation", "City", "outdated"
        ),
        Template("knows", "{s} is a friend of {o}.", "Person", "Person", "dangling"),
        Template("knows", "{s} once met {o}.", "Person", "Person", "dangling"),
        Template("hobby", "{s} enjoys {o}.", "Person", "Activity", "irrelevant", LOWER_PHRASE),
        Template("has_pet", "{s} owns a dog named {o}.", "Person", "Animal", "irrelevant"),
    ]
)


def templates_for(predicate: str, kind: StatementKind = "fact") -> tuple[Template, ...]:
    """The templates of ``predicate`` of the given kind, in table order."""
    return tuple(t for t in TEMPLATES if t.predicate == predicate and t.kind == kind)


# --------------------------------------------------------------------------- KB facts

#: The type of an entity read from a KB-fact sentence (a KB such as PathQuestion's is untyped).
KB_ENTITY_TYPE = "Entity"
_KB_FACT = re.compile(rf"The (?P<p>{LOWER_PHRASE}) of (?P<s>{NAME}) is (?P<o>{NAME})\.")


def render_kb_fact(subject: str, predicate: str, obj: str) -> str:
    """The sentence stating a KB triple: ``"The place of birth of X is Y."`` (``predicate`` in
    lower-case snake case, ``subject`` and ``obj`` names as the module docstring defines them)."""
    return f"The {predicate.replace('_', ' ')} of {subject} is {obj}."


def match_kb_fact(sentence: str) -> tuple[str, str, str] | None:
    """``(subject, predicate, object)`` of a :func:`render_kb_fact` sentence, else ``None``."""
    m = _KB_FACT.fullmatch(sentence)
    return None if m is None else (m.group("s"), m.group("p").replace(" ", "_"), m.group("o"))
