"""Docs are tests: every fenced code block of README.md and docs/*.md runs here, or says in the
markdown why it cannot.

Markers are HTML comments on the lines right before a block (invisible on the rendered page):

- ``<!-- not-run: REASON -->``: the block is not run, for the reason given (a reason is required).
  Its ``triage`` / ``triage-lightrag-server`` commands are still checked statically: the subcommand
  and every option exist, the CLI parses the line (``--help`` appended), no synopsis bracket is left.
- ``<!-- needs: data -->``: runs with ``TRIAGE_DATA_DIR`` set to the shared KGQA data
  (``../shared/data``); skipped, saying so, when it is absent. ``<!-- needs: postgres -->``: runs
  against a throw-away PostgreSQL database (``tests/store/pgserver.py``), whose URL replaces the
  placeholder ``postgresql://triage@db.example/triage``; skipped only without PostgreSQL.
- ``<!-- snippet-prelude: NAME -->`` (python): host objects the fragment assumes (an existing
  ``rag``, ``config``, ``docs``), built with the offline stand-ins (:data:`PRELUDES`); without the
  marker, :data:`PRELUDE_FOR` by the block's first line. A prelude supplies objects only, never a
  name the snippet should have imported. An *epilogue* (:data:`EPILOGUES`) then checks the block
  did what the page says.
- ``<!-- snippet-session: NAME -->`` (python): the blocks of one page with that name run in order in
  one interpreter (a page written as one walk-through), each after its own prelude.

How blocks run: python blocks in a fresh interpreter in a temporary directory, top-level ``await``
compiled with ``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT`` (the text stays as written). Shell blocks as one
``bash -e`` script, in one temporary directory per page, offline, with a timeout; the only changes
are LightRAG's port 9621 replaced by a free one (``HOST=127.0.0.1``: servers bind the loopback) and
the PostgreSQL placeholder above. A server a block starts in the background is stopped with the
block's process group. :data:`EXPECT` names what some blocks must print. Blocks that are not code
(a TOML entry point, a diagram, an output excerpt) are listed in :data:`OTHER`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
SHARED_DATA = ROOT.parent / "shared" / "data"
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
ENV = {
    **os.environ,
    **OFFLINE,
    "COLUMNS": "200",
    "NO_COLOR": "1",
    "HOST": "127.0.0.1",
    "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
}
TIMEOUT = 240
CODE = {"python", "bash", "sh", "shell", "console"}
MARKERS = {"not-run", "needs", "snippet-prelude", "snippet-session", "snippet-epilogue"}
PG_PLACEHOLDER = "postgresql://triage@db.example/triage"


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    markers: dict[str, str] = field(default_factory=dict)
    doc: str = "README.md"

    @property
    def first(self) -> str:
        return self.text.strip().splitlines()[0].strip() if self.text.strip() else ""

    @property
    def prelude(self) -> str | None:
        return self.markers.get("snippet-prelude")

    @property
    def id(self) -> str:
        return f"{self.doc}:L{self.line}-{self.lang or 'plain'}"

    @property
    def is_code(self) -> bool:
        return self.lang in CODE or _is_command_block(self)

    @property
    def needs(self) -> str:
        return self.markers.get("needs", "").split(" ", 1)[0]


_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*([\w-]+)\s*(?::\s*(.*?))?\s*-->$")


def _markers(lines: list[str], fence: int) -> dict[str, str]:
    """The ``<!-- name: value -->`` comments on the lines right before line ``fence`` (blank lines
    between them allowed)."""
    found: dict[str, str] = {}
    j = fence - 1
    while j >= 0 and (not lines[j].strip() or _MARKER.match(lines[j].strip())):
        m = _MARKER.match(lines[j].strip())
        if m:
            found.setdefault(m.group(1), m.group(2) or "")
        j -= 1
    return found


def readme_blocks(text: str | None = None, doc: str = "README.md") -> list[Block]:
    """The fenced blocks of a page (README.md unless ``text`` is given), in order."""
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
        blocks.append(Block(m.group(1), "\n".join(body) + "\n", start + 1, _markers(lines, start), doc))
        i += 1
    return blocks


def doc_blocks() -> list[Block]:
    """Every fenced block of README.md and docs/*.md."""
    return [
        b
        for path in DOCS
        for b in readme_blocks(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]


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


BLOCKS = doc_blocks()
CODE_BLOCKS = [b for b in BLOCKS if b.is_code]


def test_every_code_block_runs_or_says_why_not() -> None:
    """Each python / shell block is run by a test below, or carries ``not-run`` with a reason; no
    marker is misspelt; no command block is left untagged."""
    problems = []
    for b in BLOCKS:
        unknown = set(b.markers) - MARKERS
        if unknown:
            problems.append(f"{b.id}: unknown marker(s) {sorted(unknown)} (known: {sorted(MARKERS)})")
        if "not-run" in b.markers and len(b.markers["not-run"].split()) < 3:
            problems.append(f"{b.id}: not-run needs a reason (<!-- not-run: why it cannot run here -->)")
        if b.needs and b.needs not in ("data", "postgres"):
            problems.append(f"{b.id}: needs {b.needs!r}: only data or postgres")
        if _is_command_block(b):
            problems.append(f"{b.id}: a command block without ```bash")
    assert not problems, "\n".join(problems)


def test_count_of_blocks() -> None:
    """The closing note of issue #33 counts them: most blocks run, few are marked."""
    not_run = [b for b in CODE_BLOCKS if "not-run" in b.markers]
    assert len(CODE_BLOCKS) >= 20 and len(not_run) * 2 < len(CODE_BLOCKS), (len(CODE_BLOCKS), len(not_run))


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
    "graphrag-project": """\
# Host object: `config`, a GraphRagConfig (offline models) of a project with two documents, not indexed yet.
from pathlib import Path as _Path
from triage_graphrag.offline import offline_config

_root = _Path("project")
(_root / "input").mkdir(parents=True)
(_root / "input" / "inception.txt").write_text(
    "Inception was directed by Christopher Nolan. Leonardo DiCaprio starred in Inception.", encoding="utf-8")
(_root / "input" / "nolan.txt").write_text(
    "Christopher Nolan was born in London. Christopher Nolan directed Interstellar.", encoding="utf-8")
config = offline_config(_root)
""",
    "graphrag-tables": """\
# Host objects: the output tables of the index built above, and a `question`.
import pandas as _pd

entities, communities, community_reports, text_units, relationships = (
    _pd.read_parquet(_root / "output" / f"{n}.parquet")
    for n in ("entities", "communities", "community_reports", "text_units", "relationships")
)
question = "Who directed Inception?"
""",
    "llamaindex-index": """\
# Host objects: `index`, a PropertyGraphIndex over three documents, its `llm` and embedder `embed`, with
# an instrumentor learning from feedback (offline stand-ins).
from llama_index.core import Document as _Document, PropertyGraphIndex as _Index, Settings as _Settings
from triage_llamaindex import LlamaIndexInstrumentor as _Instrumentor, TriageExtractionTap as _Tap
from triage_llamaindex import TriageLLMPathExtractor as _Extractor
from triage_llamaindex.offline import OfflineEmbedding as _Embedding, OfflineLLM as _LLM

llm, embed = _LLM(), _Embedding()
_Settings.llm, _Settings.embed_model = llm, embed
_inst = _Instrumentor().instrument(store="triage.sqlite", reweight=True)
index = _Index.from_documents(
    [_Document(text=t) for t in ("Nolan directed Inception.", "Nolan was born in London.", "Nolan directed Interstellar.")],
    kg_extractors=[_Extractor(llm=llm), _Tap()])
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
from triage_plugins import TriageManager as _M
with _M(entry_points=False, synchronous=True) as _m:
    _m.register(ToyMetrics())
    _r = _m.metrics
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
    "graphrag-page": """\
from triage_plugins.store import open_store as _open
assert isinstance(response, str) and response
with _open("triage.sqlite", readonly=True) as _store:
    assert _store.counts()["events"] > 0
""",
    "llamaindex-closed": """\
from triage_plugins.store import open_store as _open
assert str(response)
with _open("triage.sqlite", readonly=True) as _store:
    assert _store.counts()["events"] > 0
""",
    "llamaindex-index": """\
assert retriever.retrieve("Where was Nolan born?")
assert str(engine.query("Where was Nolan born?")) is not None
_inst.uninstrument()
""",
}


#: Which prelude / epilogue a python block gets, by its first line (when no marker names one).
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
#: Epilogues by page and first line, where one first line opens blocks of different shape.
EPILOGUE_AT = {
    ("docs/llamaindex.md", "from llama_index.core import PropertyGraphIndex"): "llamaindex-closed",
    (
        "docs/llamaindex.md",
        "from triage_llamaindex import TriagePostprocessor, TriageLLMSynonymRetriever, "
        "TriageVectorContextRetriever",
    ): "llamaindex-index",
    ("docs/graphrag.md", "import graphrag.api as api"): None,
}
#: Epilogues of sessions (run after the session's last block).
SESSION_EPILOGUE = {"graphrag-page": "graphrag-page"}
#: The framework each prelude needs (the block is skipped, saying so, without it).
NEEDS_MODULE = {"lightrag": "lightrag", "graphrag": "graphrag", "llamaindex": "llama_index"}


def _prelude_of(block: Block) -> str | None:
    return block.prelude or (None if block.markers.get("snippet-session") else PRELUDE_FOR.get(block.first))


def _epilogue_of(block: Block) -> str | None:
    if "snippet-epilogue" in block.markers:
        return block.markers["snippet-epilogue"] or None
    if (block.doc, block.first) in EPILOGUE_AT:
        return EPILOGUE_AT[(block.doc, block.first)]
    return EPILOGUE_FOR.get(block.first)


def _skip_without_framework(*names: str | None) -> None:
    for name in names:
        module = NEEDS_MODULE.get((name or "").split("-", 1)[0])
        if module and importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")


def run_files(files: list[tuple[str, str]], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Write ``(name, text)`` files into ``cwd`` and run them in order in one namespace."""
    names = []
    for name, text in files:
        if text:
            (cwd / f"{name}.py").write_text(text, encoding="utf-8")
            names.append(f"{name}.py")
    (cwd / "_runner.py").write_text(RUNNER, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "_runner.py", *names],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def _file_name(block: Block) -> str:
    return re.sub(r"\W", "_", block.id)


PYTHON = [b for b in CODE_BLOCKS if b.lang == "python" and "not-run" not in b.markers]
SINGLE = [b for b in PYTHON if "snippet-session" not in b.markers]
SESSIONS: dict[str, list[Block]] = {}
for _b in PYTHON:
    if "snippet-session" in _b.markers:
        SESSIONS.setdefault(f"{_b.doc}#{_b.markers['snippet-session']}", []).append(_b)


@pytest.mark.parametrize("block", SINGLE, ids=[b.id for b in SINGLE])
def test_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    prelude, epilogue = _prelude_of(block), _epilogue_of(block)
    _skip_without_framework(prelude, epilogue)
    out = run_files(
        [("prelude", PRELUDES.get(prelude or "", "")), (_file_name(block), block.text),
         ("epilogue", EPILOGUES.get(epilogue or "", ""))],
        tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, f"{block.id}:\n{out.stderr[-4000:]}"


@pytest.mark.parametrize("session", sorted(SESSIONS))
def test_python_session_runs_as_written(session: str, tmp_path: Path) -> None:
    """A page's walk-through: its blocks in order, in one interpreter (the failing block is named in
    the traceback by its file, ``docs_graphrag_md_L43_python.py``)."""
    blocks = SESSIONS[session]
    _skip_without_framework(*(b.prelude for b in blocks))
    files = []
    for block in blocks:
        files += [(f"prelude_{_file_name(block)}", PRELUDES.get(block.prelude or "", "")),
                  (_file_name(block), block.text)]  # fmt: skip
    files.append(("epilogue", EPILOGUES.get(SESSION_EPILOGUE.get(session.split("#")[1], ""), "")))
    out = run_files(files, tmp_path)
    assert out.returncode == 0, f"{session}:\n{out.stderr[-4000:]}"


# --------------------------------------------------------------------------- shell snippets

#: What a shell block must print (stdout and stderr together), by page and first line.
EXPECT = {
    ("README.md", "triage-lightrag-server --port 9621 --working-dir ./rag_storage \\"): [
        '"status":"recorded"'
    ],
    ("docs/lightrag.md", "triage-lightrag-server --port 9621 --working-dir ./rag_storage \\"): [
        '"status":"recorded"',
        '"queries"',
    ],
    (
        "README.md",
        "export TRIAGE_STORE_URL=postgresql://triage@db.example/triage   # every adapter, manager and "
        "server; password via PGPASSWORD or ~/.pgpass",
    ): ["created the triage store"],
    (
        "docs/postgres.md",
        "export TRIAGE_STORE_URL=postgresql://triage@db.example/triage   # password: PGPASSWORD or ~/.pgpass",
    ): ["created the triage store", "events"],
    (
        "docs/graphrag.md",
        "mkdir -p project/input && printf 'Christopher Nolan directed Inception.\\n' > "
        "project/input/nolan.txt",
    ): ["events {'extraction': 1, 'graph': 1}", "Christopher Nolan", "query id graphrag-"],
    (
        "README.md",
        "cd \"${TRIAGE_DATA_DIR:-../shared/data}\" && sha256sum --check --ignore-missing <<'EOF'",
    ): ["pathquestion/PQ-3H.txt: OK"],
    ("README.md", 'PQ="${TRIAGE_DATA_DIR:-../shared/data}/pathquestion"'): [
        "Held-out gain after 1 round(s)",
        "misled by the noise",
    ],
}

SHELL = [b for b in CODE_BLOCKS if b.lang != "python"]
RUN_SHELL = [b for b in SHELL if "not-run" not in b.markers]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def page_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One working directory per page, shared by its shell blocks (created on first use)."""
    return {}


@pytest.fixture(scope="session")
def docs_postgres(postgres_server):
    """The suite's PostgreSQL server (tests/conftest.py) for ``needs: postgres`` blocks, or a skip."""
    return sys.modules["triage_tests_pgserver"], postgres_server


def run_shell(block: Block, cwd: Path, env: dict[str, str], text: str) -> tuple[int | None, str]:
    """``text`` as one ``bash -e`` script in its own process group (stopped afterwards: a server it
    started in the background goes with it); ``(exit status or None on timeout, output)``."""
    log = cwd / f".{_file_name(block)}.log"
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            ["bash", "-e", "-c", text], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            code: int | None = proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _stop_group(proc.pid)
    return code, log.read_text(encoding="utf-8", errors="replace")


def _stop_group(pgid: int) -> None:
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.mark.parametrize("block", RUN_SHELL, ids=[b.id for b in RUN_SHELL])
def test_shell_block_runs_as_written(block: Block, page_dirs: dict[str, Path], request: pytest.FixtureRequest,
                                     tmp_path_factory: pytest.TempPathFactory) -> None:  # fmt: skip
    env, text = dict(ENV), block.text
    if block.needs == "data":
        if not SHARED_DATA.is_dir():
            pytest.skip(f"real KGQA data not found at {SHARED_DATA} (a fresh clone has no ../shared)")
        env["TRIAGE_DATA_DIR"] = str(SHARED_DATA)
    drop = None
    if block.needs == "postgres":
        pg, cluster = request.getfixturevalue("docs_postgres")
        url, drop = pg.fresh_database(cluster.url)
        assert PG_PLACEHOLDER in text, f"{block.id}: needs postgres but names no {PG_PLACEHOLDER}"
        text = text.replace(PG_PLACEHOLDER, url)
    if "9621" in text:
        text = text.replace("9621", str(_free_port()))
    cwd = page_dirs.setdefault(block.doc, tmp_path_factory.mktemp(re.sub(r"\W", "_", block.doc)))
    try:
        code, output = run_shell(block, cwd, env, text)
    finally:
        if drop is not None:
            drop()
    assert code is not None, f"{block.id} did not finish in {TIMEOUT} s:\n{output[-3000:]}"
    assert code == 0, f"{block.id} exited {code}:\n{output[-4000:]}"
    assert "Traceback" not in output, f"{block.id}:\n{output[-4000:]}"
    for wanted in EXPECT.get((block.doc, block.first), []):
        assert wanted in output, f"{block.id}: {wanted!r} not in its output:\n{output[-3000:]}"


def test_expectations_name_real_blocks() -> None:
    firsts = {(b.doc, b.first) for b in RUN_SHELL}
    stale = sorted(set(EXPECT) - firsts)
    assert not stale, f"EXPECT names no runnable block: {stale}"


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


def _tool_words(command: str) -> list[str]:
    """The command's words without leading ``NAME=value`` assignments; [] unless it runs our tools."""
    words = shlex.split(command)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words = words[1:]
    return words if words and words[0] in ("triage", "triage-lightrag-server") else []


def static_problems(command: str) -> list[str]:
    """What is wrong with a triage command without running it: brackets, unknown subcommand/options."""
    words = _tool_words(command)
    if not words:
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


NOT_RUN_COMMANDS = [(b, c) for b in SHELL if "not-run" in b.markers for c in commands(b) if _tool_words(c)]


@pytest.mark.parametrize(
    "block, command", NOT_RUN_COMMANDS, ids=[f"{b.id}:{c[:50]}" for b, c in NOT_RUN_COMMANDS]
)
def test_not_run_command_is_accepted(block: Block, command: str) -> None:
    """A ``triage`` / ``triage-lightrag-server`` command in a not-run block: its options exist and
    the CLI parses it (``--help`` appended: an unknown option is refused before the help prints)."""
    assert not static_problems(command), (block.id, static_problems(command))
    words = _tool_words(command)
    exe = shutil.which(words[0], path=ENV["PATH"])
    if exe is None:
        pytest.skip(f"{words[0]} is not installed")
    out = subprocess.run([exe, *words[1:], "--help"], env=ENV, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{block.id}: {command}\n{out.stdout[-1500:]}{out.stderr[-1500:]}"


def triage(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "triage"), *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=TIMEOUT
    )


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`triage demo`, from the README's first block (the set-up commands around it are CI's)."""
    cwd = tmp_path_factory.mktemp("demo")
    (setup,) = [b for b in BLOCKS if b.doc == "README.md" and b.line < 10]
    (command,) = [c for c in commands(setup) if c == "triage demo"]
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
