"""Every fenced block of README.md is executed as written, or listed below with the reason it is not.

- ```python blocks run unchanged in a fresh interpreter (the venv's), in a temporary directory,
  offline. A fragment that needs a host object (an existing ``rag``, ``config``, ``docs``) gets a
  *prelude* that builds that object with the project's offline stand-ins, and an *epilogue* that
  checks the snippet did what the README says. Top-level ``await`` is compiled with
  ``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT`` and awaited by the harness, so the snippet text stays as is.
  A prelude supplies host *objects* only, never a name the snippet should have imported.
  Which prelude a block gets: an HTML comment ``<!-- snippet-prelude: NAME -->`` on the line
  before the block, else :data:`PRELUDE_FOR` (keyed by the block's first line).
- ```bash blocks (and untagged blocks that are commands) are split into commands; each is either in
  :data:`RUN` (run here) or :data:`SKIP` (with the reason). A command in neither fails the test, so a
  new snippet is never silently untested. Skipped ``triage`` commands are still checked statically:
  the subcommand and every option exist (``--help``) and no synopsis bracket (``[--opt]``) is left in.
- The other blocks (a TOML entry point, a diagram, an output excerpt) are in :data:`OTHER`.
- The command table's synopses name real subcommands and options.

A block that is wrong as written is in :data:`XFAIL` with the corrected text: the test checks that
the README text still fails and that the correction runs, then xfails. Once README carries the
correction the block passes and the entry must go (a stale entry fails).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
ENV = {
    **os.environ,
    **OFFLINE,
    "COLUMNS": "200",
    "NO_COLOR": "1",
    "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
}
TIMEOUT = 240


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    prelude: str | None  # from a <!-- snippet-prelude: NAME --> marker

    @property
    def first(self) -> str:
        return self.text.strip().splitlines()[0].strip() if self.text.strip() else ""

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.lang or 'plain'}"


_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"<!--\s*snippet-prelude:\s*([\w-]+)\s*-->")


def readme_blocks(text: str | None = None) -> list[Block]:
    """The fenced blocks of README.md, in order."""
    lines = (README.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.search(before)
        blocks.append(
            Block(m.group(1), "\n".join(body) + "\n", start + 1, marker.group(1) if marker else None)
        )
        i += 1
    return blocks


def _is_command_block(block: Block) -> bool:
    """An untagged block whose first word is a command users would type (it should be tagged bash)."""
    return block.lang == "" and block.first.split(" ", 1)[0] in {"triage", "python", "pip", "curl"}


def _split_line(line: str) -> list[str]:
    """One shell line's commands, as written: split at ``;`` / ``&&`` outside quotes, comment dropped."""
    parts, current, quote, i = [], "", "", 0
    while i < len(line):
        ch = line[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (not current or current[-1].isspace()):
            break
        elif ch == ";" or line.startswith("&&", i):
            parts.append(current)
            current, i = "", i + (2 if ch == "&" else 1)
            continue
        current += ch
        i += 1
    return [" ".join(p.split()) for p in [*parts, current] if p.strip()]


def commands(block: Block) -> list[str]:
    """The commands of a shell block, as written: continuations joined, comments dropped."""
    return [c for line in block.text.replace("\\\n", " ").splitlines() for c in _split_line(line)]


# --------------------------------------------------------------------------- python snippets

#: The harness: run each file in one namespace; a file with top-level ``await`` runs on one event loop
#: shared by all files (the host objects live on it), the others run outside any loop, as scripts do.
RUNNER = """\
import ast, asyncio, inspect, sys

loop = asyncio.new_event_loop()
ns = {"__name__": "__main__"}
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE:
        loop.run_until_complete(eval(code, ns))
    else:
        exec(code, ns)
loop.close()
"""

#: Host objects a fragment needs, built offline. Each names what it stands for.
PRELUDES = {
    "lightrag": """\
# Host object: `rag`, an existing, initialized LightRAG instance (offline stand-ins, 12 documents).
import logging
from triage_lightrag.testing import build_rag
from triage_plugins.offline.world import generate_world

logging.getLogger("lightrag").setLevel(logging.ERROR)
_world = generate_world(0, n_documents=12, n_questions=6)
rag = await build_rag("rag_storage", [d.text for d in _world.documents])
""",
    "graphrag": """\
# Host objects: `config`, a GraphRagConfig (offline models), and the output tables of an index already
# built from it (`entities`, `communities`, `reports`, `text_units`, `relationships`).
from pathlib import Path as _Path
import graphrag.api as _api
import pandas as _pd
from triage_graphrag.offline import offline_config

_root = _Path("project")
(_root / "input").mkdir(parents=True)
(_root / "input" / "inception.txt").write_text(
    "Inception was directed by Christopher Nolan. Leonardo DiCaprio starred in Inception.", encoding="utf-8")
(_root / "input" / "nolan.txt").write_text(
    "Christopher Nolan was born in London. Christopher Nolan directed Interstellar.", encoding="utf-8")
config = offline_config(_root)
await _api.build_index(config)
entities, communities, reports, text_units, relationships = (
    _pd.read_parquet(_root / "output" / f"{n}.parquet")
    for n in ("entities", "communities", "community_reports", "text_units", "relationships")
)
""",
    "llamaindex": """\
# Host objects: `docs` (LlamaIndex Documents) and `llm`, the host's LLM; the host's Settings name its
# models (offline stand-ins: the core's rule-based extractor and hashing embedder).
from llama_index.core import Document as _Document, Settings as _Settings
from triage_llamaindex.offline import OfflineEmbedding as _Embedding, OfflineLLM as _LLM

llm = _LLM()
_Settings.llm, _Settings.embed_model = llm, _Embedding()
docs = [_Document(text=t) for t in (
    "Nolan directed Inception.", "Nolan was born in London.", "Nolan directed Interstellar.")]
""",
}

#: Checks that a snippet did what the README says (run after it, in its namespace).
EPILOGUES = {
    "plugin": """\
from triage_plugins import TriageManager as _M
with _M(":memory:", entry_points=False) as _m:
    _m.register(SlowQueryAlarm())   # a misspelt hook would be refused here
    assert any("SlowQueryAlarm" in p.name or "slow" in p.name.lower() for p in _m.plugins()), _m.plugins()
""",
    "metric": """\
from triage_plugins.metrics.registry import metric_registry as _registry
_r = _registry(plugins=[ToyMetrics()])
assert "WORDS" in _r and _r.origin("WORDS") == "plugin 'ToyMetrics'", _r.origin("WORDS")
assert answer_words(None).value is None
""",
    "lightrag": """\
from triage_plugins.store import open_store as _open
assert isinstance(answer, str) and answer
assert _open("triage.sqlite", readonly=True).counts()["events"] > 0
await rag.finalize_storages()
""",
    "graphrag": """\
assert isinstance(result.response, str) and result.query_id
inst.flush()
assert inst.manager.store.counts()["events"] > 0
inst.uninstrument()
""",
    "llamaindex": """\
_answer = engine.query("Who directed Inception?")
inst.flush()
assert str(_answer) and inst.manager.store.counts()["events"] > 0
inst.uninstrument()
""",
}

#: Which prelude / epilogue a python block gets, by its first line (when it carries no marker).
PRELUDE_FOR = {
    "from lightrag import QueryParam": "lightrag",
    "import graphrag.api": "graphrag",
    "from llama_index.core import PropertyGraphIndex": "llamaindex",
}
EPILOGUE_FOR = {
    **PRELUDE_FOR,
    "class SlowQueryAlarm:": "plugin",
    "class ToyMetrics:": "metric",
}

#: Blocks wrong as written (first line -> why, the error it raises, the corrected block).
XFAIL: dict[str, tuple[str, str, str]] = {}


def run_python(snippet: str, block: Block, cwd: Path) -> subprocess.CompletedProcess[str]:
    prelude = block.prelude or PRELUDE_FOR.get(block.first)
    epilogue = EPILOGUE_FOR.get(block.first)
    files = []
    for name, text in (("prelude", PRELUDES.get(prelude or "", "")), ("snippet", snippet),
                       ("epilogue", EPILOGUES.get(epilogue or "", ""))):  # fmt: skip
        if text:
            (cwd / f"{name}.py").write_text(text, encoding="utf-8")
            files.append(f"{name}.py")
    (cwd / "_runner.py").write_text(RUNNER, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "_runner.py", *files],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


PYTHON = [b for b in readme_blocks() if b.lang == "python"]


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    prelude = block.prelude or PRELUDE_FOR.get(block.first)
    if prelude and prelude in ("lightrag", "graphrag", "llamaindex"):
        pytest.importorskip(
            {"lightrag": "lightrag", "graphrag": "graphrag", "llamaindex": "llama_index"}[prelude]
        )
    (tmp_path / "readme").mkdir()
    out = run_python(block.text, block, tmp_path / "readme")
    if block.first not in XFAIL:
        assert out.returncode == 0, f"README line {block.line}:\n{out.stderr[-4000:]}"
        return
    reason, error, fixed = XFAIL[block.first]
    assert out.returncode != 0, f"README line {block.line} now runs: remove its XFAIL entry"
    assert error in out.stderr, f"README line {block.line} fails otherwise than listed:\n{out.stderr[-4000:]}"
    (tmp_path / "fixed").mkdir()
    fixed_out = run_python(fixed, block, tmp_path / "fixed")
    assert fixed_out.returncode == 0, (
        f"the correction for line {block.line} fails too:\n{fixed_out.stderr[-4000:]}"
    )
    pytest.xfail(f"README line {block.line}: {reason} (corrected text in XFAIL)")


# --------------------------------------------------------------------------- shell snippets

#: Commands this test runs (in a temporary directory, after `triage demo` made the store).
RUN = {
    "triage demo": "the README's first command's main job (about 15 s)",
}

#: Commands not run here, each with the reason (matched exactly, after whitespace is normalised).
SKIP = {
    "python3 -m venv .venv": "set-up: creates the environment this suite runs in",
    ". .venv/bin/activate": "set-up: the environment this suite runs in",
    'pip install -e ".[all,dev]"': "set-up: reaches the package registry, minutes",
    "python -m pytest": "the test suite itself",
    'pip install "triage-plugins[postgres]"': "reaches the package registry",
    "export TRIAGE_STORE_URL=postgresql://triage@db.example/triage": "a placeholder PostgreSQL server "
    "(PostgreSQL stores: tests/store/test_postgres.py, on a real server)",
    'triage report "$TRIAGE_STORE_URL"': "needs that PostgreSQL server (tests/store/test_postgres.py)",
    'triage store info "$TRIAGE_STORE_URL"': "needs that PostgreSQL server (tests/store/test_postgres.py)",
    'pip install "triage-plugins[llamaindex,otel,phoenix]" arize-phoenix': "reaches the package registry",
    "phoenix serve": "a Phoenix server, left running (tests/test_phoenix_e2e.py starts one)",
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:6006 python examples/llamaindex_quickstart.py --store triage.sqlite": (
        "exports to that Phoenix server (tests/test_phoenix_e2e.py; the example itself: tests/test_examples.py)"
    ),
    "triage feedback pull --store triage.sqlite --endpoint http://localhost:6006": (
        "needs that Phoenix server and a rating made in its UI (tests/test_phoenix_e2e.py)"
    ),
    'pip install "triage-plugins[lightrag-server]"': "reaches the package registry",
    "triage-lightrag-server --port 9621 --working-dir ./rag_storage": (
        "a long-running server with a real LLM (tests/adapters/test_lightrag_server.py runs it offline)"
    ),
    'curl -si localhost:9621/query -H \'content-type: application/json\' -d \'{"query": "Who directed Inception?", '
    '"mode": "hybrid"}\' | grep -i x-triage-query-id': "needs that server",
    'curl -s localhost:9621/triage/feedback -H \'content-type: application/json\' -d \'{"query_id": "<that id>", '
    '"score": 1.0}\'': "needs that server and an id it returned",
    "triage report ./rag_storage/triage.sqlite": "reads the store that server wrote",
    "TRIAGE_REWEIGHT=1 TRIAGE_STORE_URL=postgresql://… triage-lightrag-server --gunicorn --workers 4": (
        "a placeholder PostgreSQL URL and a server (tests/adapters/test_lightrag_gunicorn.py)"
    ),
    "triage compare --feedback-rounds 2 --store compare.sqlite --json compare.json --html compare.html": (
        "about two minutes on 2 cores (tests/test_compare.py runs compare on fewer questions)"
    ),
    "triage evolve-bench --kb ../shared/data/pathquestion/3H-kb.txt --questions ../shared/data/pathquestion/PQ-3H.txt "
    "--sample 500 --seeds 3": (
        "minutes, and the KGQA data of ../shared/data (tests/test_evolve_bench.py runs it on a sample)"
    ),
}

SHELL = [b for b in readme_blocks() if b.lang in ("bash", "sh", "shell", "console") or _is_command_block(b)]
COMMANDS = [(b, c) for b in SHELL for c in commands(b)]


def _norm(command: str) -> str:
    return " ".join(command.split())


RUN_N, SKIP_N = {_norm(k): v for k, v in RUN.items()}, {_norm(k): v for k, v in SKIP.items()}


def test_every_shell_command_is_run_or_listed() -> None:
    unlisted = [f"README line {b.line}: {c}" for b, c in COMMANDS if _norm(c) not in RUN_N | SKIP_N]
    assert not unlisted, "add each to RUN or SKIP in tests/test_readme.py:\n" + "\n".join(unlisted)
    stale = sorted((RUN_N | SKIP_N).keys() - {_norm(c) for _, c in COMMANDS})
    assert not stale, f"listed but no longer in README.md: {stale}"


def test_command_blocks_are_tagged() -> None:
    untagged = [f"README line {b.line}: {b.first}" for b in readme_blocks() if _is_command_block(b)]
    if untagged:
        pytest.xfail("a command block without ```bash: " + "; ".join(untagged))


@functools.cache
def help_text(program: str, *sub: str) -> str:
    """``program sub --help`` (wide, no colour); '' when the program is not installed."""
    exe = shutil.which(program, path=ENV["PATH"])
    if exe is None:
        return ""
    out = subprocess.run([exe, *sub, "--help"], env=ENV, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{program} {' '.join(sub)} --help: {out.stderr[-2000:]}"
    return out.stdout


def _subcommand(words: list[str]) -> tuple[str, ...]:
    sub = []
    for word in words:
        if not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        sub.append(word)
    return tuple(sub)


def static_problems(command: str) -> list[str]:
    """What is wrong with a triage command without running it: brackets, unknown subcommand/options."""
    words = shlex.split(command)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words = words[1:]
    if not words or words[0] not in ("triage", "triage-lightrag-server"):
        return []
    problems = [
        f"{w!r} is synopsis notation, not shell: the shell passes it as is" for w in words if "[" in w
    ]
    sub = _subcommand(words[1:]) if words[0] == "triage" else ()
    text = help_text(words[0], *sub)
    if not text:
        return problems
    for word in words:
        option = word.split("=", 1)[0].strip("[]")
        if option.startswith("--") and option not in text:
            problems.append(f"{option} is not an option of {' '.join([words[0], *sub])}")
    return problems


@pytest.mark.parametrize("command", [c for _, c in COMMANDS if _norm(c) in SKIP_N], ids=lambda c: c[:60])
def test_skipped_command_is_well_formed(command: str) -> None:
    problems = static_problems(command)
    if problems and _norm(command) in STATIC_XFAIL:
        pytest.xfail(STATIC_XFAIL[_norm(command)])
    assert not problems, problems


LIGHTRAG_DOC = ROOT / "docs" / "lightrag.md"


def _tool_words(command: str) -> list[str]:
    """The command's words without leading ``NAME=value`` assignments; [] unless it runs our tools."""
    words = shlex.split(command)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words = words[1:]
    return words if words and words[0] in ("triage", "triage-lightrag-server") else []


DOC_TOOL_COMMANDS = [
    c
    for b in readme_blocks(LIGHTRAG_DOC.read_text(encoding="utf-8"))
    if b.lang in ("bash", "sh", "shell", "console") or _is_command_block(b)
    for c in commands(b)
    if _tool_words(c)
]


def test_lightrag_doc_names_its_commands() -> None:
    programs = {_tool_words(c)[0] for c in DOC_TOOL_COMMANDS}
    assert programs == {"triage", "triage-lightrag-server"}, DOC_TOOL_COMMANDS


@pytest.mark.parametrize("command", DOC_TOOL_COMMANDS, ids=lambda c: c[:60])
def test_lightrag_doc_command_is_accepted(command: str) -> None:
    """Every ``triage`` / ``triage-lightrag-server`` command of docs/lightrag.md: its options exist
    (``--help`` text) and the CLI parses it (run with ``--help`` appended: an unknown option such as
    ``triage report --store`` is refused before the help is printed)."""
    assert not static_problems(command)
    words = _tool_words(command)
    exe = shutil.which(words[0], path=ENV["PATH"])
    if exe is None:
        pytest.skip(f"{words[0]} is not installed")
    out = subprocess.run([exe, *words[1:], "--help"], env=ENV, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"docs/lightrag.md: {command}\n{out.stdout[-1500:]}{out.stderr[-1500:]}"


#: Skipped commands wrong as written (README fix in the report / the reason).
STATIC_XFAIL: dict[str, str] = {}


def triage(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "triage"), *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=TIMEOUT
    )


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`triage demo` as the README runs it, in a fresh directory."""
    cwd = tmp_path_factory.mktemp("demo")
    (command,) = [c for _, c in COMMANDS if _norm(c) == "triage demo"]
    out = subprocess.run(
        shlex.split(command), cwd=cwd, env=ENV, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "Traceback" not in out.stdout + out.stderr and out.stdout.strip()
    return cwd


def test_demo_writes_the_store_the_readme_names(demo_dir: Path) -> None:
    assert (demo_dir / "triage-demo.sqlite").is_file()


def test_readme_report_command_writes_a_page(demo_dir: Path) -> None:
    """`triage report triage-demo.sqlite --html report.html` (What `triage demo` shows)."""
    assert "`triage report triage-demo.sqlite --html report.html`" in README.read_text(encoding="utf-8")
    out = triage("report", "triage-demo.sqlite", "--html", "report.html", cwd=demo_dir)
    assert out.returncode == 0, out.stderr[-3000:]
    page = (demo_dir / "report.html").read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html") and "triage" in page.lower()


def test_store_info_and_plugins(demo_dir: Path) -> None:
    """`triage store info STORE` (read-only) and `triage plugins [--json]` (the command table)."""
    before = (demo_dir / "triage-demo.sqlite").read_bytes()
    info = triage("store", "info", "triage-demo.sqlite", cwd=demo_dir)
    assert info.returncode == 0 and "events" in info.stdout, info.stderr[-3000:]
    assert (demo_dir / "triage-demo.sqlite").read_bytes() == before, "store info must not write"
    listing = triage("plugins", "--json", cwd=demo_dir)
    assert listing.returncode == 0, listing.stderr[-3000:]
    names = json.dumps(json.loads(listing.stdout))
    for name in (
        "triage.recorder",
        "triage.implementation",
        "triage.usage",
        "triage.gate",
        "triage.feedback",
    ):
        assert name in names


# --------------------------------------------------------------------------- the command table


def table_synopses() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Command line", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return [m.replace("\\|", "|") for m in re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)]


@pytest.mark.parametrize("synopsis", table_synopses(), ids=lambda s: s.split(" [")[0][:40])
def test_command_table_names_real_options(synopsis: str) -> None:
    words = synopsis.split()
    program = words[0]
    sub = _subcommand(words[1:]) if program == "triage" else ()
    text = help_text(program, *sub)
    if not text:
        pytest.skip(f"{program} is not installed")
    options = {w.strip("[]|…").split("=", 1)[0] for w in words if w.strip("[]|").startswith("--")}
    missing = sorted(o for o in options if o not in text)
    assert not missing, f"{' '.join([program, *sub])} --help has no {missing}"


# --------------------------------------------------------------------------- the other blocks

#: Blocks that are not code to run, by first line (a new one must be added here with what it is).
OTHER = {
    "LightRAG ──┐                                           ┌─ triage.recorder        events → SQLite store": (
        "the architecture diagram"
    ),
    "Answer accuracy (gold; means; Hits@1 with its 95 % interval)": "an excerpt of `triage compare` output",
    "[project.entry-points.triage]": "a pyproject entry point (checked by test_entry_point_block)",
}


def test_every_other_block_is_listed() -> None:
    code = {"python", "bash", "sh", "shell", "console"}
    others = [b for b in readme_blocks() if b.lang not in code and not _is_command_block(b)]
    unlisted = [f"README line {b.line}: {b.first}" for b in others if b.first not in OTHER]
    assert not unlisted, "add each to OTHER (or tag it) in tests/test_readme.py:\n" + "\n".join(unlisted)


def test_entry_point_block() -> None:
    """The TOML block is valid and uses the entry-point group the manager loads."""
    (block,) = [b for b in readme_blocks() if b.lang == "toml"]
    group = tomllib.loads(block.text)["project"]["entry-points"]
    assert list(group) == ["triage"]
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    assert "triage" in ours


ENTRY_POINT_RUNNER = """\
import json, sys
from triage_plugins import TriageManager
from triage_plugins.contract.events import RetrievalEvent

name = sys.argv[1]
with TriageManager(store=None, synchronous=True, defaults=False) as manager:  # entry points loaded
    loaded = {p.name: p for p in manager.plugins()}
    errors = [f"{e}" for e in manager.load_errors if name in str(e)]
    manager.emit_retrieval(RetrievalEvent("demo", "q-1", "Who directed Inception?", seconds=2.5, retriever="local"))
    failures = {"/".join(k): n for k, n in manager.failures.items() if name in k}
print(json.dumps({"loaded": name in loaded, "errors": errors, "failures": failures}))
"""


def test_entry_point_example_works_as_the_manager_loads_it(tmp_path: Path) -> None:
    """README's plugin, shipped as its TOML block says (a distribution with that entry point on the
    path), loaded by a TriageManager the way it loads every entry point, and called: no load error,
    no failure, and the hook runs (a class named there would fail on every call)."""
    (toml,) = [b for b in readme_blocks() if b.lang == "toml"]
    [(name, target)] = tomllib.loads(toml.text)["project"]["entry-points"]["triage"].items()
    module, _, attr = target.partition(":")
    [plugin] = [b for b in readme_blocks() if b.lang == "python" and "class SlowQueryAlarm" in b.text]
    source = tmp_path / Path(*module.split(".")).with_suffix(".py")
    for package in source.relative_to(tmp_path).parents[:-1]:
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").touch()
    source.write_text(plugin.text, encoding="utf-8")
    dist = tmp_path / "my_package-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: my-package\nVersion: 0.1\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(f"[triage]\n{name} = {target}\n", encoding="utf-8")
    (tmp_path / "run.py").write_text(ENTRY_POINT_RUNNER, encoding="utf-8")
    env = {
        **ENV,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), ENV.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    out = subprocess.run(
        [sys.executable, "run.py", name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    *printed, result = out.stdout.strip().splitlines()
    got = json.loads(result)
    assert got == {"loaded": True, "errors": [], "failures": {}}, (
        got,
        f"{name} = {target!r}",
        out.stderr[-2000:],
    )
    assert "slow query q-1: 2.50s via local" in printed, (printed, attr)


def test_parser_sees_markers_and_commands() -> None:
    """The parser itself: a marker names the prelude, continuations and `&&` / `;` split commands."""
    text = textwrap.dedent("""\
        <!-- snippet-prelude: lightrag -->
        ```python
        x = 1
        ```
        ```bash
        a --b c \\
            --d && e; f   # note
        ```
        """)
    py, sh = readme_blocks(text)
    assert (py.lang, py.prelude, py.line) == ("python", "lightrag", 2)
    assert commands(sh) == ["a --b c --d", "e", "f"]
