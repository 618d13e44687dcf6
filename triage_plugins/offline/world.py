"""A seeded synthetic world: typed entities, facts, documents, noise and questions (DESIGN §5).

:func:`generate_world` builds a small world of people, organisations, cities, countries and films
linked by the relations of :data:`~triage_plugins.offline.templates.RELATIONS`, writes each fact
as one templated sentence into entity-centred paragraphs of documents, injects the noise that real
extraction meets, and asks 1- to 3-hop questions with gold answers and gold paths.

Noise knobs (:class:`NoiseConfig`) are exact counts of *sentences*, and :attr:`World.noise_log`
says where each one went:

- ``aliases``: fact sentences that name one endpoint by an alias ("Chris Nolan" for
  "Christopher Nolan"); with 0 no alias appears anywhere in the text;
- ``dangling``: sentences that mention a person who is not an entity of the world;
- ``outdated``: former values of functional relations ("formerly worked for X") that conflict with
  a current fact of the same subject;
- ``irrelevant``: true but out-of-schema facts (hobbies, pets);
- ``duplicates``: facts stated a second time, in a different document.

Everything is drawn from one ``random.Random(seed)`` and iterated in list order, so a seed gives the
same world in every process (no dependence on ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Chunk, Gold, Triple
from triage_plugins.kg.ontology import Ontology, PredicateSpec
from triage_plugins.offline.templates import (
    RELATIONS,
    Template,
    templates_for,
)

__all__ = [
    "Document",
    "Entity",
    "NoiseConfig",
    "NoiseRecord",
    "Question",
    "Statement",
    "World",
    "generate_world",
]

log = logging.getLogger("triage.offline.world")

StatementKind = Literal["fact", "alias", "duplicate", "outdated", "dangling", "irrelevant"]
NoiseKind = Literal["alias", "duplicate", "outdated", "dangling", "irrelevant"]

# --------------------------------------------------------------------------- name pools

_FIRST_NAMES: tuple[tuple[str, str], ...] = (
    ("Alexander", "Alex"), ("Benjamin", "Ben"), ("Christopher", "Chris"), ("Daniel", "Dan"),
    ("Edward", "Ned"), ("Frederick", "Fred"), ("Gabriel", "Gabe"), ("Henry", "Hal"),
    ("Isabella", "Bella"), ("Jacqueline", "Jackie"), ("Katherine", "Kate"), ("Leonard", "Leo"),
    ("Margaret", "Maggie"), ("Nicholas", "Nick"), ("Olivia", "Liv"), ("Patricia", "Patty"),
    ("Rebecca", "Becky"), ("Samuel", "Sam"), ("Theodore", "Teddy"), ("Victoria", "Vicky"),
    ("William", "Bill"), ("Elizabeth", "Liz"), ("Jonathan", "Jon"), ("Matthew", "Matt"),
    ("Stephanie", "Steph"), ("Anthony", "Tony"), ("Josephine", "Josie"), ("Eleanor", "Nell"),
    ("Dorothy", "Dot"), ("Abigail", "Abby"), ("Cornelius", "Neil"), ("Gregory", "Greg"),
    ("Lawrence", "Larry"), ("Penelope", "Penny"), ("Raymond", "Ray"), ("Susannah", "Sue"),
    ("Timothy", "Tim"), ("Valentina", "Val"), ("Zachary", "Zach"), ("Florence", "Flo"),
)  # fmt: skip
_SURNAMES: tuple[str, ...] = (
    "Nolan", "Harlow", "Whitaker", "Castellan", "Mercer", "Okafor", "Lindqvist", "Moreau",
    "Tanaka", "Abernathy", "Delacroix", "Fairweather", "Gallagher", "Hargrove", "Kowalski",
    "Lockwood", "Marchetti", "Novak", "Osei", "Prescott", "Quinlan", "Rasmussen", "Sandoval",
    "Thornbury", "Underhill", "Vasquez", "Wexley", "Yamamoto", "Zeller", "Ashdown", "Bellamy",
    "Carrow", "Dunmore", "Ellery", "Fontaine", "Greaves", "Holloway", "Ingram", "Jessop", "Kincaid",
)  # fmt: skip
# Names of people who are *not* in the world (dangling mentions): disjoint from the pools above.
_DANGLING_FIRST: tuple[str, ...] = (
    "Ulric", "Wendeline", "Yorick", "Xanthe", "Ignatius", "Philippa", "Rupert", "Odette",
    "Caspian", "Marisol",
)  # fmt: skip
_DANGLING_LAST: tuple[str, ...] = (
    "Thistlewood", "Ravensworth", "Quillon", "Brackley", "Fennimore", "Halloway", "Oakhurst",
    "Pembrook",
)  # fmt: skip
_CITIES: tuple[str, ...] = (
    "Port Elira", "Ashford", "Brennmoor", "Calvera", "Dunmere", "Eastwick", "Falkreach",
    "Glenhaven", "Harrowgate", "Ironvale", "Kestrel Bay", "Lunmouth", "Marrowby", "Northfield",
    "Oakridge", "Pellham",
)  # fmt: skip
_COUNTRIES: tuple[str, ...] = ("Valdoria", "Estmark", "Norland", "Ostrelia", "Caldera", "Meridia")
_ORG_PREFIXES: tuple[str, ...] = (
    "Northwind", "Bluestone", "Silverline", "Redfern", "Greyhaven", "Brightwater", "Cobaltworks",
    "Starling", "Copperfield", "Westmarch",
)  # fmt: skip
_ORG_SUFFIXES: tuple[str, ...] = ("Studios", "Pictures", "Media", "Labs", "Group", "Films")
_FILM_ADJECTIVES: tuple[str, ...] = (
    "Glass", "Silent", "Crimson", "Hollow", "Distant", "Burning", "Winter", "Paper", "Golden",
    "Broken", "Velvet", "Midnight", "Quiet", "Amber", "Lost",
)  # fmt: skip
_FILM_NOUNS: tuple[str, ...] = (
    "Orchard", "Harbor", "Lantern", "Meridian", "Garden", "Tide", "Compass", "Mirror",
    "Horizon", "Atlas", "Canyon", "Reverie", "Ember", "Cathedral", "Frontier",
)  # fmt: skip
_GENRES: tuple[str, ...] = ("Drama", "Comedy", "Thriller", "Western", "Documentary", "Horror", "Mystery")
_HOBBIES: tuple[str, ...] = (
    "gardening", "chess", "sailing", "birdwatching", "pottery", "fencing", "rock climbing", "baking",
)  # fmt: skip
_PETS: tuple[str, ...] = ("Biscuit", "Pepper", "Rufus", "Mochi", "Juniper", "Waffles")

# Noun phrases that verbalize one step of a question path: (relation, direction) -> phrase around
# the inner phrase {x}. Direction "+" walks subject -> object, "-" walks object -> subject.
_NESTED: dict[tuple[str, str], str] = {
    ("born_in", "+"): "the birthplace of {x}",
    ("born_in", "-"): "a person born in {x}",
    ("nationality", "+"): "the country of citizenship of {x}",
    ("nationality", "-"): "a citizen of {x}",
    ("spouse", "+"): "the spouse of {x}",
    ("spouse", "-"): "the spouse of {x}",
    ("parents", "+"): "a parent of {x}",
    ("parents", "-"): "a child of {x}",
    ("works_for", "+"): "the employer of {x}",
    ("works_for", "-"): "an employee of {x}",
    ("founded_by", "+"): "the founder of {x}",
    ("founded_by", "-"): "an organisation founded by {x}",
    ("headquartered_in", "+"): "the headquarters city of {x}",
    ("headquartered_in", "-"): "an organisation headquartered in {x}",
    ("located_in", "+"): "the country of {x}",
    ("located_in", "-"): "a city in {x}",
    ("directed_by", "+"): "the director of {x}",
    ("directed_by", "-"): "a film directed by {x}",
    ("written_by", "+"): "the writer of {x}",
    ("written_by", "-"): "a film written by {x}",
    ("starred_actors", "+"): "a star of {x}",
    ("starred_actors", "-"): "a film starring {x}",
    ("produced_by", "+"): "the producer of {x}",
    ("produced_by", "-"): "a film produced by {x}",
    ("release_year", "+"): "the release year of {x}",
    ("release_year", "-"): "a film released in {x}",
    ("has_genre", "+"): "the genre of {x}",
    ("has_genre", "-"): "a film whose genre is {x}",
}
# Possessive nouns ("X's director's birthplace"), where English has one.
_POSSESSIVE: dict[tuple[str, str], str] = {
    ("born_in", "+"): "birthplace",
    ("nationality", "+"): "country of citizenship",
    ("spouse", "+"): "spouse",
    ("spouse", "-"): "spouse",
    ("parents", "+"): "parent",
    ("parents", "-"): "child",
    ("works_for", "+"): "employer",
    ("works_for", "-"): "employee",
    ("founded_by", "+"): "founder",
    ("headquartered_in", "+"): "headquarters city",
    ("located_in", "+"): "country",
    ("directed_by", "+"): "director",
    ("written_by", "+"): "writer",
    ("starred_actors", "+"): "star",
    ("produced_by", "+"): "producer",
    ("release_year", "+"): "release year",
    ("has_genre", "+"): "genre",
}
_TOPIC_TYPES = ("Person", "Film", "Organisation", "City")
_MAX_ANSWERS = 4

# --------------------------------------------------------------------------- public data


@dataclass(frozen=True, slots=True)
class NoiseConfig:
    """How much noise to inject; every knob is an exact number of sentences.

    ``NoiseConfig()`` is the default moderate noise; :meth:`clean` has none.
    """

    aliases: int = 8
    dangling: int = 4
    outdated: int = 4
    irrelevant: int = 6
    duplicates: int = 6

    def __post_init__(self) -> None:
        for name in ("aliases", "dangling", "outdated", "irrelevant", "duplicates"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"NoiseConfig.{name} must be a whole number >= 0, got {value!r}")

    @classmethod
    def clean(cls) -> NoiseConfig:
        """No noise at all."""
        return cls(aliases=0, dangling=0, outdated=0, irrelevant=0, duplicates=0)


@dataclass(frozen=True, slots=True)
class Entity:
    """An entity of the world: its canonical name (the id), type and alternative surface forms."""

    id: str
    type: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Document:
    """A source document: paragraphs of sentences (one paragraph per chunk)."""

    id: str
    title: str
    paragraphs: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True, slots=True)
class Statement:
    """One sentence of the corpus and the triple it states, exactly as written.

    :param subject: the subject's surface form in the sentence (an alias for ``kind="alias"``).
    :param kind: ``"fact"``, ``"alias"`` (a fact with an aliased endpoint), ``"duplicate"`` (a fact
        stated again elsewhere), ``"outdated"``, ``"dangling"`` or ``"irrelevant"``.
    :param fact_id: id of the world triple this sentence states (fact, alias, duplicate), or for
        ``"outdated"`` the id of the current fact it conflicts with.
    """

    id: str
    doc_id: str
    paragraph: int
    sentence: int
    text: str
    subject: str
    predicate: str
    object: str
    subject_type: str
    object_type: str
    kind: StatementKind
    fact_id: str | None = None

    @property
    def chunk_id(self) -> str:
        return _chunk_id(self.doc_id, self.paragraph)


@dataclass(frozen=True, slots=True)
class NoiseRecord:
    """One injected noise sentence.

    :param entity: the world entity concerned (the aliased entity; the subject otherwise).
    :param surface: the alias used, the dangling name, the outdated value or the irrelevant object;
        ``None`` for duplicates.
    :param fact_id: the aliased or duplicated fact, or the current fact an outdated one conflicts with.
    """

    kind: NoiseKind
    statement_id: str
    doc_id: str
    paragraph: int
    sentence: int
    text: str
    entity: str
    surface: str | None
    fact_id: str | None

    @property
    def chunk_id(self) -> str:
        return _chunk_id(self.doc_id, self.paragraph)


@dataclass(frozen=True, slots=True)
class Question:
    """A question with its gold annotations.

    :param relations: the relation path asked for, as ``(relation, "+"|"-")`` steps from the topic
        entity ("+" follows a triple subject -> object, "-" object -> subject).
    :param paths: every gold path (topic -> answer), each a sequence of world triples.
    """

    id: str
    text: str
    answers: tuple[str, ...]
    paths: tuple[tuple[Triple, ...], ...]
    topic_entities: tuple[str, ...]
    hops: int
    relations: tuple[tuple[str, str], ...]

    def gold(self) -> Gold:
        """The :class:`~triage_plugins.contract.events.Gold` of this question."""
        return Gold(answers=self.answers, paths=self.paths, entities=self.topic_entities)


@dataclass(frozen=True)
class World:
    """A generated world; see :func:`generate_world`.

    :param triples: the true current facts (what questions are answered over).
    :param statements: every sentence of the corpus with the triple it states, as written.
    :param noise_log: exactly what noise was injected where.
    """

    seed: int
    noise: NoiseConfig
    entities: tuple[Entity, ...]
    triples: tuple[Triple, ...]
    documents: tuple[Document, ...]
    statements: tuple[Statement, ...]
    questions: tuple[Question, ...]
    noise_log: tuple[NoiseRecord, ...]
    _by_id: Mapping[str, Entity] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", MappingProxyType({e.id: e for e in self.entities}))

    @property
    def relations(self) -> tuple[str, ...]:
        """Names of the world's relations (the schema, without noise predicates)."""
        return tuple(RELATIONS)

    def entity(self, entity_id: str) -> Entity:
        """The entity with this canonical name (``KeyError`` when unknown)."""
        return self._by_id[entity_id]

    def has_entity(self, entity_id: str) -> bool:
        return entity_id in self._by_id

    def aliases(self) -> dict[str, str]:
        """Every alias -> its canonical entity id (for ``GraphEvent.aliases``)."""
        return {alias: e.id for e in self.entities for alias in e.aliases}

    def chunks(self) -> list[Chunk]:
        """One :class:`~triage_plugins.contract.events.Chunk` per paragraph, in document order.

        Chunk ids are ``"<doc id>#p<paragraph>"``; the locator holds ``paragraph`` (0-based) and
        ``section`` (the document title).
        """
        return [
            Chunk(_chunk_id(d.id, i), d.id, text, {"paragraph": i, "section": d.title})
            for d in self.documents
            for i, text in enumerate(d.paragraphs)
        ]

    def ontology(self) -> Ontology:
        """The world's schema as an :class:`~triage_plugins.kg.ontology.Ontology`."""
        classes = ["Person", "Organisation", "Place", "City", "Country", "Work", "Film", "Genre", "Year"]
        return Ontology(
            classes=tuple(classes),
            subclass_of={"City": "Place", "Country": "Place", "Film": "Work"},
            disjoint=(("Person", "Organisation"), ("Person", "Place"), ("Person", "Work"), ("Place", "Work")),
            predicates={
                s.name: PredicateSpec(s.name, s.domain, s.range, s.functional, s.max_cardinality)
                for s in RELATIONS.values()
            },
        )


# --------------------------------------------------------------------------- generation


def _chunk_id(doc_id: str, paragraph: int) -> str:
    return f"{doc_id}#p{paragraph}"


@dataclass(slots=True)
class _Draft:
    """A sentence under construction (positions are fixed only at the end)."""

    template: Template
    subject: str
    object: str
    kind: StatementKind
    fact_id: str | None = None
    noise_entity: str | None = None
    noise_surface: str | None = None


@dataclass(slots=True)
class _Builder:
    rng: random.Random
    entities: dict[str, Entity] = field(default_factory=dict)
    facts: list[Triple] = field(default_factory=list)
    used_first: dict[str, int] = field(default_factory=dict)
    person_names: list[tuple[str, str]] = field(default_factory=list)

    def add_entity(self, name: str, type_: str, aliases: tuple[str, ...] = ()) -> str:
        if name in self.entities:
            raise AssertionError(f"duplicate entity {name!r}")
        self.entities[name] = Entity(name, type_, aliases)
        return name

    def add_fact(self, subject: str, predicate: str, obj: str) -> Triple:
        t = Triple.of(
            subject,
            predicate,
            obj,
            subject_type=self.entities[subject].type,
            object_type=self.entities[obj].type,
        )
        self.facts.append(t)
        return t

    def new_person(self, surname: str | None = None) -> str:
        taken = {(f, s) for f, s in self.person_names}
        options = [
            (first, nick, last)
            for first, nick in _FIRST_NAMES
            for last in ([surname] if surname else _SURNAMES)
            if (first, last) not in taken
        ]
        if not options:
            raise ConfigError("ran out of distinct person names; lower n_people")
        first, nick, last = self.rng.choice(options)
        self.person_names.append((first, last))
        return self.add_entity(f"{first} {last}", "Person", (f"{nick} {last}",))


def _check_sizes(**sizes: int) -> None:
    limits = {
        "n_people": (6, 200),
        "n_organisations": (1, len(_ORG_PREFIXES)),
        "n_cities": (1, len(_CITIES)),
        "n_countries": (1, len(_COUNTRIES)),
        "n_films": (1, len(_FILM_ADJECTIVES) * len(_FILM_NOUNS)),
        "n_documents": (1, 10_000),
        "n_questions": (0, 10_000),
        "max_hops": (1, 3),
    }
    for name, value in sizes.items():
        low, high = limits[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(
                f"generate_world: {name} must be a whole number in [{low}, {high}], got {value!r}"
            )


def generate_world(
    seed: int = 0,
    *,
    n_people: int = 24,
    n_organisations: int = 6,
    n_cities: int = 8,
    n_countries: int = 3,
    n_films: int = 12,
    n_documents: int = 30,
    n_questions: int = 60,
    max_hops: int = 3,
    noise: NoiseConfig | None = None,
) -> World:
    """Generate a deterministic synthetic world (DESIGN §5).

    The defaults give about 70 entities, 200 facts, 30 documents (50 paragraphs) and 60 questions
    (a third each of 1, 2 and 3 hops), in a few milliseconds.

    :param seed: the world is a pure function of the seed and the other arguments.
    :param noise: exact noise counts (default :class:`NoiseConfig`); a count larger than the world
        can hold raises :class:`~triage_plugins.contract.errors.ConfigError`.
    """
    _check_sizes(
        n_people=n_people,
        n_organisations=n_organisations,
        n_cities=n_cities,
        n_countries=n_countries,
        n_films=n_films,
        n_documents=n_documents,
        n_questions=n_questions,
        max_hops=max_hops,
    )
    noise = NoiseConfig() if noise is None else noise
    if not isinstance(noise, NoiseConfig):
        raise ConfigError(f"generate_world: noise must be a NoiseConfig, got {type(noise).__name__}")
    rng = random.Random(seed)
    b = _Builder(rng)
    _populate(b, n_people, n_organisations, n_cities, n_countries, n_films)
    paragraphs, titles = _write_documents(b, n_documents)
    _inject_noise(b, paragraphs, noise)
    documents, statements, noise_log = _finalize(paragraphs, titles)
    questions = _ask_questions(b, n_questions, max_hops)
    return World(
        seed=seed,
        noise=noise,
        entities=tuple(b.entities.values()),
        triples=tuple(b.facts),
        documents=documents,
        statements=statements,
        questions=questions,
        noise_log=noise_log,
    )


def _populate(b: _Builder, n_people: int, n_orgs: int, n_cities: int, n_countries: int, n_films: int) -> None:
    rng = b.rng
    countries = [b.add_entity(c, "Country") for c in rng.sample(_COUNTRIES, n_countries)]
    cities = [b.add_entity(c, "City") for c in rng.sample(_CITIES, n_cities)]
    suffixes = list(_ORG_SUFFIXES)
    orgs = [
        b.add_entity(f"{p} {rng.choice(suffixes)}", "Organisation", (p,))
        for p in rng.sample(_ORG_PREFIXES, n_orgs)
    ]
    people = _populate_people(b, n_people)
    _populate_places_and_work(b, people, cities, countries, orgs)
    _populate_films(b, people, orgs, n_films)
    # Keep entity order stable and readable: by type, then creation order.
    type_order = {"Person": 0, "Organisation": 1, "City": 2, "Country": 3, "Film": 4, "Genre": 5, "Year": 6}
    ordered = sorted(b.entities.values(), key=lambda e: type_order[e.type])
    b.entities = {e.id: e for e in ordered}


def _populate_people(b: _Builder, n_people: int) -> list[str]:
    """Families (two married parents, 1-3 children with the first parent's surname), one third
    generation when the budget allows, then singles, some of them married."""
    rng = b.rng
    people: list[str] = []
    parent_facts: list[tuple[str, str]] = []  # (child, parent)

    def marry(a: str, c: str) -> None:
        b.add_fact(a, "spouse", c)

    remaining = n_people
    families: list[list[str]] = []
    for _ in range(max(1, n_people // 8)):
        if remaining < 3:
            break
        pa, pb = b.new_person(), b.new_person()
        remaining -= 2
        marry(pa, pb)
        kids = []
        for _ in range(min(rng.randint(1, 3), remaining)):
            kid = b.new_person(pa.split(" ", 1)[1])
            remaining -= 1
            kids.append(kid)
            parent_facts += [(kid, pa), (kid, pb)]
        people += [pa, pb, *kids]
        families.append(kids)
    if remaining >= 2 and families and families[0]:
        kid = families[0][0]
        partner = b.new_person()
        marry(kid, partner)
        grandchild = b.new_person(kid.split(" ", 1)[1])
        parent_facts += [(grandchild, kid), (grandchild, partner)]
        people += [partner, grandchild]
        remaining -= 2
    singles = [b.new_person() for _ in range(remaining)]
    people += singles
    for i in range(len(singles) // 4):
        marry(singles[2 * i], singles[2 * i + 1])
    for child, parent in parent_facts:
        b.add_fact(child, "parents", parent)
    return people


def _populate_places_and_work(
    b: _Builder, people: list[str], cities: list[str], countries: list[str], orgs: list[str]
) -> None:
    """Cities in countries; each person's birthplace, nationality and employer; organisations' seats."""
    rng = b.rng
    city_country = {}
    order = cities[:]
    rng.shuffle(order)
    for i, city in enumerate(order):
        city_country[city] = countries[i % len(countries)]
    for city in cities:
        b.add_fact(city, "located_in", city_country[city])
    for person in people:
        city = rng.choice(cities)
        b.add_fact(person, "born_in", city)
        home = city_country[city]
        others = [c for c in countries if c != home]
        b.add_fact(person, "nationality", home if not others or rng.random() < 0.75 else rng.choice(others))
        if rng.random() < 0.75:
            b.add_fact(person, "works_for", rng.choice(orgs))
    for org in orgs:
        b.add_fact(org, "headquartered_in", rng.choice(cities))
        b.add_fact(org, "founded_by", rng.choice(people))


def _populate_films(b: _Builder, people: list[str], orgs: list[str], n_films: int) -> None:
    """Films with directors, writers, actors, producer, release year and genre."""
    rng = b.rng
    titles = [f"The {a} {n}" for a in _FILM_ADJECTIVES for n in _FILM_NOUNS]
    film_names = rng.sample(titles, n_films)
    genres = rng.sample(_GENRES, min(5, len(_GENRES)))
    directors = rng.sample(people, max(2, len(people) // 3))
    for title in film_names:
        film = b.add_entity(title, "Film", (title.removeprefix("The "),))
        director = rng.choice(directors)
        b.add_fact(film, "directed_by", director)
        n_writers = rng.randint(1, 2)
        writers = [director] if rng.random() < 0.3 else []
        writers += rng.sample([p for p in people if p not in writers], max(0, n_writers - len(writers)))
        for writer in writers:
            b.add_fact(film, "written_by", writer)
        for actor in rng.sample([p for p in people if p != director], rng.randint(2, 3)):
            b.add_fact(film, "starred_actors", actor)
        b.add_fact(film, "produced_by", rng.choice(orgs))
        year = str(rng.randint(1975, 2020))
        if year not in b.entities:
            b.add_entity(year, "Year")
        b.add_fact(film, "release_year", year)
        genre = rng.choice(genres)
        if genre not in b.entities:
            b.add_entity(genre, "Genre")
        b.add_fact(film, "has_genre", genre)


def _write_documents(b: _Builder, n_documents: int) -> tuple[list[list[list[_Draft]]], list[str]]:
    """Documents of entity-centred paragraphs: one paragraph per subject, one sentence per fact."""
    rng = b.rng
    by_subject: dict[str, list[Triple]] = {}
    for t in b.facts:
        by_subject.setdefault(t.subject, []).append(t)
    subjects = list(by_subject)
    rng.shuffle(subjects)
    n_docs = min(n_documents, len(subjects))
    docs: list[list[list[_Draft]]] = [[] for _ in range(n_docs)]
    titles: list[str] = [""] * n_docs
    for i, subject in enumerate(subjects):
        d = i % n_docs
        if not docs[d]:
            titles[d] = subject
        facts = by_subject[subject][:]
        rng.shuffle(facts)
        docs[d].append(
            [_Draft(rng.choice(templates_for(t.predicate)), t.subject, t.object, "fact", t.id) for t in facts]
        )
    return docs, titles


def _inject_noise(b: _Builder, docs: list[list[list[_Draft]]], noise: NoiseConfig) -> None:
    ctx = _Noise(b, docs)
    _noise_aliases(ctx, noise.aliases)
    _noise_duplicates(ctx, noise.duplicates)
    _noise_outdated(ctx, noise.outdated)
    _noise_dangling(ctx, noise.dangling)
    _noise_irrelevant(ctx, noise.irrelevant)


class _Noise:
    """What every kind of injected noise reads: the world, its documents, where each fact lives."""

    def __init__(self, b: _Builder, docs: list[list[list[_Draft]]]) -> None:
        self.b = b
        self.rng = b.rng
        self.docs = docs
        self.facts = {t.id: t for t in b.facts}
        self.home: dict[str, list[_Draft]] = {}  # subject -> its paragraph
        self.doc_of_fact: dict[str, int] = {}
        for d, paragraphs in enumerate(docs):
            for para in paragraphs:
                self.home[para[0].subject] = para
                for draft in para:
                    if draft.fact_id is not None:
                        self.doc_of_fact[draft.fact_id] = d
        self.people = [e.id for e in b.entities.values() if e.type == "Person"]

    def insert(self, para: list[_Draft], draft: _Draft) -> None:
        para.insert(self.rng.randint(0, len(para)), draft)

    @staticmethod
    def too_many(knob: str, wanted: int, available: int) -> None:
        if wanted > available:
            raise ConfigError(
                f"NoiseConfig.{knob}={wanted} but this world has room for only {available}; "
                f"lower it or enlarge the world"
            )


def _noise_aliases(ctx: _Noise, count: int) -> None:
    """Replace one endpoint of ``count`` fact sentences with one of its aliases."""
    b, rng = ctx.b, ctx.rng
    candidates = [
        draft
        for paragraphs in ctx.docs
        for para in paragraphs
        for draft in para
        if b.entities[draft.subject].aliases or b.entities[draft.object].aliases
    ]
    ctx.too_many("aliases", count, len(candidates))
    for draft in rng.sample(candidates, count):
        sides = [side for side in ("subject", "object") if b.entities[getattr(draft, side)].aliases]
        side = rng.choice(sides)
        entity = getattr(draft, side)
        alias = rng.choice(b.entities[entity].aliases)
        setattr(draft, side, alias)
        draft.kind, draft.noise_entity, draft.noise_surface = "alias", entity, alias


def _noise_duplicates(ctx: _Noise, count: int) -> None:
    """Restate a fact in a different document (canonical names, another wording if any)."""
    rng, docs, facts = ctx.rng, ctx.docs, ctx.facts
    fact_ids = list(facts)
    ctx.too_many("duplicates", count, len(fact_ids) if len(docs) > 1 else 0)
    for fid in rng.sample(fact_ids, count):
        t = facts[fid]
        origin = ctx.doc_of_fact[fid]
        target = rng.choice([d for d in range(len(docs)) if d != origin])
        variants = templates_for(t.predicate)
        template = variants[(variants.index(_template_of(docs, fid)) + 1) % len(variants)]
        draft = _Draft(template, t.subject, t.object, "duplicate", fid, t.subject, None)
        ctx.insert(rng.choice(docs[target]), draft)


_FUNCTIONAL_RANGES = {
    "works_for": "Organisation",
    "spouse": "Person",
    "nationality": "Country",
    "headquartered_in": "City",
}


def _noise_outdated(ctx: _Noise, count: int) -> None:
    """A former value of a functional relation that conflicts with the current fact."""
    b = ctx.b
    current: dict[tuple[str, str], Triple] = {}
    for t in b.facts:
        current[(t.subject, t.predicate)] = t
        if t.predicate == "spouse":
            current[(t.object, t.predicate)] = t
    options: list[tuple[str, str, Triple, list[str]]] = []
    for (subject, predicate), fact in current.items():
        if predicate not in _FUNCTIONAL_RANGES:
            continue
        now = fact.object if fact.subject == subject else fact.subject
        relatives = {t.object for t in b.facts if t.predicate == "parents" and t.subject == subject}
        relatives |= {t.subject for t in b.facts if t.predicate == "parents" and t.object == subject}
        pool = [
            e.id
            for e in b.entities.values()
            if e.type == _FUNCTIONAL_RANGES[predicate]
            and e.id not in (now, subject)
            and e.id not in relatives
        ]
        if pool:  # a former value needs somewhere else to have been
            options.append((subject, predicate, fact, pool))
    ctx.too_many("outdated", count, len(options))
    for subject, predicate, fact, pool in ctx.rng.sample(options, count):
        old = ctx.rng.choice(pool)
        template = templates_for(predicate, "outdated")[0]
        ctx.insert(ctx.home[subject], _Draft(template, subject, old, "outdated", fact.id, subject, old))


def _noise_dangling(ctx: _Noise, count: int) -> None:
    """Mention a person who is not an entity of the world."""
    rng = ctx.rng
    names = [f"{f} {s}" for f in _DANGLING_FIRST for s in _DANGLING_LAST]
    ctx.too_many("dangling", count, len(names))
    for name in rng.sample(names, count):
        subject = rng.choice(ctx.people)
        template = rng.choice(templates_for("knows", "dangling"))
        ctx.insert(ctx.home[subject], _Draft(template, subject, name, "dangling", None, subject, name))


def _noise_irrelevant(ctx: _Noise, count: int) -> None:
    """True but out-of-schema facts (each distinct)."""
    people = ctx.people
    pairs = [(p, "hobby", h) for p in people for h in _HOBBIES] + [
        (p, "has_pet", n) for p in people for n in _PETS
    ]
    ctx.too_many("irrelevant", count, len(pairs))
    for subject, predicate, obj in ctx.rng.sample(pairs, count):
        template = templates_for(predicate, "irrelevant")[0]
        ctx.insert(ctx.home[subject], _Draft(template, subject, obj, "irrelevant", None, subject, obj))


def _template_of(docs: list[list[list[_Draft]]], fact_id: str) -> Template:
    for paragraphs in docs:
        for para in paragraphs:
            for draft in para:
                if draft.fact_id == fact_id and draft.kind in ("fact", "alias"):
                    return draft.template
    raise AssertionError(f"fact {fact_id!r} was never written")


def _finalize(
    docs: list[list[list[_Draft]]], titles: list[str]
) -> tuple[tuple[Document, ...], tuple[Statement, ...], tuple[NoiseRecord, ...]]:
    documents, statements, log_rows = [], [], []
    for d, paragraphs in enumerate(docs):
        doc_id = f"doc-{d:03d}"
        texts = []
        for p, para in enumerate(paragraphs):
            sentences = []
            for s, draft in enumerate(para):
                text = draft.template.render(draft.subject, draft.object)
                sentences.append(text)
                sid = f"{_chunk_id(doc_id, p)}#s{s}"
                statements.append(
                    Statement(
                        sid,
                        doc_id,
                        p,
                        s,
                        text,
                        draft.subject,
                        draft.template.predicate,
                        draft.object,
                        draft.template.subject_type,
                        draft.template.object_type,
                        draft.kind,
                        draft.fact_id,
                    )
                )
                if draft.kind != "fact":
                    log_rows.append(
                        NoiseRecord(
                            draft.kind,  # type: ignore[arg-type]
                            sid,
                            doc_id,
                            p,
                            s,
                            text,
                            draft.noise_entity or draft.subject,
                            draft.noise_surface,
                            draft.fact_id,
                        )
                    )
            texts.append(" ".join(sentences))
        documents.append(Document(doc_id, titles[d], tuple(texts)))
    return tuple(documents), tuple(statements), tuple(log_rows)


# --------------------------------------------------------------------------- questions


def _ask_questions(b: _Builder, n_questions: int, max_hops: int) -> tuple[Question, ...]:
    rng = b.rng
    adj: dict[str, list[tuple[str, str, Triple, str]]] = {}
    for t in b.facts:
        adj.setdefault(t.subject, []).append((t.predicate, "+", t, t.object))
        adj.setdefault(t.object, []).append((t.predicate, "-", t, t.subject))
    topics = [e.id for e in b.entities.values() if e.type in _TOPIC_TYPES and e.id in adj]
    questions: list[Question] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    attempts = 0
    while len(questions) < n_questions and attempts < 200 * max(1, n_questions):
        attempts += 1
        hops = len(questions) % max_hops + 1
        topic = rng.choice(topics)
        steps = _random_walk(rng, adj, topic, hops)
        if steps is None or (topic, steps) in seen:
            continue
        paths = _follow(adj, topic, steps)
        answers = list(dict.fromkeys(path[-1][1] for path in paths))
        if not 1 <= len(answers) <= _MAX_ANSWERS:
            continue
        seen.add((topic, steps))
        text = _verbalize(rng, topic, steps, b.entities[answers[0]].type)
        questions.append(
            Question(
                id=f"q-{len(questions):03d}",
                text=text,
                answers=tuple(answers),
                paths=tuple(tuple(t for t, _ in path) for path in paths),
                topic_entities=(topic,),
                hops=hops,
                relations=steps,
            )
        )
    if len(questions) < n_questions:
        log.warning(
            "generated %d of %d questions: the world is too small for more", len(questions), n_questions
        )
    return tuple(questions)


def _random_walk(
    rng: random.Random, adj: Mapping[str, list[tuple[str, str, Triple, str]]], topic: str, hops: int
) -> tuple[tuple[str, str], ...] | None:
    visited = [topic]
    steps: list[tuple[str, str]] = []
    node = topic
    for _ in range(hops):
        options = [
            (p, d, nxt) for p, d, _, nxt in adj.get(node, ()) if nxt not in visited and (p, d) in _NESTED
        ]
        if not options:
            return None
        p, d, node = rng.choice(options)
        visited.append(node)
        steps.append((p, d))
    return tuple(steps)


def _follow(
    adj: Mapping[str, list[tuple[str, str, Triple, str]]], topic: str, steps: Sequence[tuple[str, str]]
) -> list[list[tuple[Triple, str]]]:
    """Every walk from ``topic`` along ``steps`` that never revisits a node: [(triple, node reached)]."""
    frontier: list[list[tuple[Triple, str]]] = [[]]
    for p, d in steps:
        grown = []
        for path in frontier:
            here = path[-1][1] if path else topic
            visited = {topic, *(n for _, n in path)}
            for q, e, t, nxt in adj.get(here, ()):
                if q == p and e == d and nxt not in visited:
                    grown.append([*path, (t, nxt)])
        frontier = grown
    return frontier


def _verbalize(rng: random.Random, topic: str, steps: Sequence[tuple[str, str]], answer_type: str) -> str:
    wh = "Who" if answer_type == "Person" else "What"
    if all(step in _POSSESSIVE for step in steps) and rng.random() < 0.5:
        chain = "".join(f"'s {_POSSESSIVE[step]}" for step in steps)
        return f"{wh} is {topic}{chain}?"
    phrase = topic
    for step in steps:
        phrase = _NESTED[step].format(x=phrase)
    return f"{wh} is {phrase}?"
