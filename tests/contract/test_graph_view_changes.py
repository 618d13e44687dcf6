"""GraphView.with_changes (issue #31): an incremental change equals the view built whole.

Each case is checked two ways: against a view the constructor builds from an independently computed
expectation (the order rules of ``with_changes`` spelled out naively), and against the constructor
run on the result's own content (every CSR array equal, not only the triples).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage_plugins.contract.errors import EventError
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.metrics.validation import validation_metrics

NODES = list("abcdefg")


def _triple(ends: tuple[str, str], predicate: str, tag: int) -> Triple:
    """Ids by ends and predicate; ``tag`` varies the content under one id (a re-typed edge)."""
    s, o = ends
    return Triple(f"{s}|{predicate}|{o}", s, predicate, o, subject_type=f"t{tag}" if tag else None)


triples_st = st.lists(
    st.builds(
        _triple,
        st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)),
        st.sampled_from(["p", "q"]),
        st.integers(0, 2),
    ),
    max_size=14,
)
names_st = st.lists(st.sampled_from([*NODES, "h", "i"]), max_size=3)


def _expected(
    base: GraphView,
    triples: list[Triple],
    removed: list[str],
    nodes: list[str],
    gone: list[str],
    labels: dict[str, str],
    sources: dict[str, list[str]],
) -> GraphView:
    """The documented rules, applied naively to lists, then built whole."""
    kept = [t for t in base.triples if t.id not in removed and t.subject not in gone and t.object not in gone]
    appended: list[Triple] = []
    seen: set[str] = set()
    for t in triples:
        if t.id in seen:
            continue
        seen.add(t.id)
        at = next((i for i, k in enumerate(kept) if k.id == t.id), None)
        if at is not None and (kept[at].subject, kept[at].object) == (t.subject, t.object):
            kept[at] = t
            continue
        if at is not None:
            del kept[at]
        appended.append(t)
    out = kept + appended
    node_list = [n for n in base.nodes if n not in gone] + nodes
    ids = {t.id for t in out}
    all_nodes = set(node_list) | {e for t in out for e in (t.subject, t.object)}
    merged_labels = {n: lab for n, lab in base.labels.items() if n not in gone} | labels
    merged_sources = {t: ch for t, ch in base.sources.items() if t in ids} | {
        t: ch for t, ch in sources.items() if t in ids
    }
    return GraphView(
        out,
        nodes=node_list,
        labels={n: lab for n, lab in merged_labels.items() if n in all_nodes},
        sources=merged_sources,
    )


def _same_arrays(a: GraphView, b: GraphView) -> None:
    assert a == b
    for name in ("indptr", "indices", "incident", "subject_index", "object_index"):
        left, right = getattr(a, name), getattr(b, name)
        assert left.dtype == right.dtype, name
        assert np.array_equal(left, right), name
    assert a.component_labels().tolist() == b.component_labels().tolist()


@settings(max_examples=300, deadline=None)
@given(
    base=triples_st,
    extra=names_st,
    change=triples_st,
    removed_pick=st.lists(st.integers(0, 20), max_size=3),
    nodes=names_st,
    gone=names_st,
    relabel=st.dictionaries(st.sampled_from([*NODES, "h"]), st.sampled_from(["Alpha", "Beta"]), max_size=2),
)
def test_a_change_equals_the_view_built_whole(base, extra, change, removed_pick, nodes, gone, relabel):
    view = GraphView(base, nodes=extra, labels={"a": "Alpha"}, sources={t.id: ["c0"] for t in base[:3]})
    before = view.to_dict()
    removed = [view.triples[i].id for i in removed_pick if i < len(view)]
    sources = {t.id: [f"c{i}"] for i, t in enumerate(change[:4])}
    out = view.with_changes(
        change, removed=removed, nodes=nodes, removed_nodes=gone, labels=relabel, sources=sources
    )
    expected = _expected(view, change, removed, nodes, gone, relabel, sources)
    _same_arrays(out, expected)
    _same_arrays(out, GraphView(out.triples, nodes=out.nodes, labels=out.labels, sources=out.sources))
    assert view.to_dict() == before  # the parent is left as it is
    delta = out.delta
    assert delta is not None and delta.parent == view.serial and out.serial != view.serial
    assert [view.nodes[k] for k in delta.removed] == sorted(
        {n for n in gone if view.has_node(n)}, key=view.node_index
    )
    kept_parent = set(view.nodes) - {view.nodes[k] for k in delta.removed}
    assert out.nodes[: delta.added_from] == tuple(n for n in view.nodes if n in kept_parent)
    assert kept_parent.isdisjoint(out.nodes[delta.added_from :])
    relabeled = {view.nodes[k] for k in delta.relabeled}
    assert relabeled == {n for n, lab in relabel.items() if n in kept_parent and view.labels.get(n) != lab}


def test_an_append_shares_nothing_writable_and_metrics_match():
    base = [Triple.of(f"n{i}", "r", f"n{(i * 7 + 3) % 50}") for i in range(200)]
    view = GraphView(base, nodes=["lonely"])
    change = [Triple.of("n1", "r", "new"), Triple.of("new", "s", "n2"), Triple.of("x", "r", "x")]
    out = view.with_changes(change, nodes=["also"])
    whole = GraphView([*base, *change], nodes=[*view.nodes, "also"])
    _same_arrays(out, whole)
    assert dict(validation_metrics(out)) == dict(validation_metrics(whole))
    for arr in (out.indptr, out.indices, out.incident, out.subject_index):
        assert not arr.flags.writeable
    assert view.degree("n1") + 1 == out.degree("n1") and out.degree("also") == 0


def test_a_replacement_in_place_shares_the_adjacency():
    view = GraphView([Triple.of("a", "r", "b"), Triple.of("b", "r", "c")])
    retyped = Triple("a|r|b", "a", "r", "b", subject_type="person")
    out = view.with_changes([retyped])
    assert out.triples == (retyped, view.triples[1])
    assert out.indices is view.indices and out.incident is view.incident  # read-only arrays reused
    assert out.delta is not None and out.delta.added_from == 3


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"triples": ["a|r|b"]}, "triples"),
        ({"removed": "a|r|b"}, "removed"),
        ({"removed": [3]}, "removed"),
        ({"nodes": [" "]}, "nodes"),
        ({"removed_nodes": "a"}, "removed_nodes"),
        ({"labels": {"a": ""}}, "labels"),
        ({"sources": {"a|r|b": "c1"}}, "sources"),
    ],
)
def test_invalid_changes_are_refused(kwargs, field):
    view = GraphView([Triple.of("a", "r", "b")])
    with pytest.raises(EventError, match=field):
        view.with_changes(**kwargs)


def test_a_pickled_view_is_rebuilt_with_its_own_serial():
    import pickle

    view = GraphView([Triple.of("a", "r", "b")], labels={"a": "Alpha"}, sources={"a|r|b": ["c1"]})
    out = view.with_changes([Triple.of("b", "r", "c")], nodes=["z"])
    back = pickle.loads(pickle.dumps(out))
    _same_arrays(back, out)
    assert back.delta is None and back.serial != out.serial  # no grounder takes it for a derived view


def test_a_chain_of_changes_shares_the_index_until_it_grows():
    view = GraphView([Triple.of(f"n{i}", "r", f"n{(i * 7 + 3) % 80}") for i in range(60)])
    first = view
    for step in range(12):
        change = [Triple.of(f"n{step}", "s", f"new{step}"), Triple.of(f"new{step}", "s", f"new{step + 1}")]
        retyped = Triple(view.triples[step].id, view.triples[step].subject, "r", view.triples[step].object,
                         object_type="thing")  # fmt: skip
        view = view.with_changes([*change, retyped], nodes=[f"iso{step}"])
        _same_arrays(view, GraphView(view.triples, nodes=view.nodes))
        assert all(view.node_index(n) == k for k, n in enumerate(view.nodes))
        assert all(view.triple_index(t.id) == k for k, t in enumerate(view.triples))
        assert view.has_node(f"new{step + 1}") and not first.has_node(f"new{step + 1}")
        if step < 5:  # few additions: the first view's dicts are shared, not copied
            assert view._triple_index.base is first._triple_index.base
    assert view._node_index.base is not first._node_index.base  # merged once they grew
    dropped = view.with_changes(removed=[view.triples[3].id], removed_nodes=["new4"])
    _same_arrays(dropped, GraphView(dropped.triples, nodes=dropped.nodes))
    assert all(dropped.triple_index(t.id) == k for k, t in enumerate(dropped.triples))
    assert not dropped.has_node("new4") and view.has_node("new4")
