"""``triage store prune`` gives the deleted runs' space back to the file system (SQLite ``VACUUM``)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from triage_plugins.apps.store_tools import prune
from triage_plugins.cli import app
from triage_plugins.contract.events import GenerationEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import Store


def _on_disk(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _fill(path: Path, run: int, n: int = 300) -> None:
    with Store.open(path) as store:
        manager = TriageManager(store, entry_points=False, synchronous=True)
        manager.start_run("test")
        for i in range(n):
            qid = f"r{run}-q{i}"
            triples = tuple(Triple.of(f"E{run}-{i}-{k}", "knows", f"E{run}-{i}-{k + 1}") for k in range(8))
            manager.emit_retrieval(
                RetrievalEvent(
                    "fw",
                    qid,
                    f"Who does E{run}-{i}-0 know? " + "x" * 200,
                    (f"E{run}-{i}-0",),
                    {f"E{run}-{i}-0": f"E{run}-{i}-0"},
                    Subgraph(triples),
                    retriever="r",
                )  # fmt: skip
            )
            manager.emit_generation(GenerationEvent("fw", qid, "y" * 200, (), {}))
        manager.close()


def test_prune_frees_disk_space(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    for run in range(3):
        _fill(path, run)
    before = _on_disk(path)
    with Store.open(path, readonly=True) as store:
        events = store.counts()["events"]
    deleted = prune(str(path), older_than=None, keep_runs=1)
    after = _on_disk(path)
    assert deleted["runs"] == 2 and deleted["events"] > 0
    assert deleted["bytes_freed"] == before - after > 0
    assert after < 0.6 * before, (before, after)  # two of three equal runs gone: about a third is left
    with Store.open(path, readonly=True) as store:
        assert store.counts()["events"] == events - deleted["events"] and len(store.runs()) == 1


def test_cli_prune_says_how_many_bytes_it_freed(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    for run in range(2):
        _fill(path, run, n=100)
    before = _on_disk(path)
    out = CliRunner().invoke(app, ["store", "prune", str(path), "--keep-runs", "1"])
    assert out.exit_code == 0, out.output
    freed = before - _on_disk(path)
    assert freed > 0 and f"{freed:,} bytes freed on disk" in out.output
    again = CliRunner().invoke(app, ["store", "prune", str(path), "--keep-runs", "1"])
    assert again.exit_code == 0 and "0 runs" in again.output and "Traceback" not in again.output
