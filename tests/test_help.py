"""Every ``--help`` stands alone and reads in a plain shell: run through the real CLI in a process
whose stdin, stdout and stderr are not terminals and whose environment sets no width (what a log,
a pipe or CI gives), each help exits 0, fits 80 columns, shows clean metavars and names an example
whose command and options exist.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import typer.main

from triage_plugins.cli import app

WIDTH = 80

# Runs in a child process (no TTY on fds 0-2, no COLUMNS): every help through typer's CliRunner.
_CHILD = r"""
import json, sys
import typer.main
from typer.testing import CliRunner
from triage_plugins.cli import app

def walk(command, path=()):
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from walk(sub, (*path, name))

out = {}
for path in walk(typer.main.get_command(app)):
    res = CliRunner().invoke(app, [*path, "--help"])
    out[" ".join(path)] = {"code": res.exit_code, "text": res.output}
json.dump(out, sys.stdout)
"""


def _plain_env() -> dict[str, str]:
    """The environment of a plain non-TTY shell: no width hints, no forced terminal or colour."""
    drop = {"COLUMNS", "LINES", "TERMINAL_WIDTH", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_plain_env(),
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    failed = {path: r["text"][-500:] for path, r in results.items() if r["code"] != 0}
    assert not failed, failed
    return {path: r["text"] for path, r in results.items()}


def _tree() -> dict[str, object]:
    """Every command path ("" for the top level) and its click command."""
    found: dict[str, object] = {}

    def walk(command: object, path: tuple[str, ...]) -> None:
        found[" ".join(path)] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def test_every_command_and_subcommand_has_a_help(helps) -> None:
    expected = set(_tree())
    assert set(helps) == expected
    # the commands the README documents are all there
    for path in ("demo", "score", "export", "schema", "explain", "calibrate", "probe", "evolve-bench",
                 "compare", "report", "plugins", "store info", "store prune", "feedback pull"):  # fmt: skip
        assert path in helps, path


def test_every_help_fits_80_columns_without_a_terminal(helps) -> None:
    for path, text in helps.items():
        wide = [line for line in text.splitlines() if len(line) > WIDTH]
        assert not wide, (path, wide[:3])
        cut = re.findall(r"\S+…", text)  # rich cuts a word longer than its column to '…'
        assert not cut, (path, cut)
        assert max(len(line) for line in text.splitlines()) == WIDTH, path  # rich used 80, not less


def test_metavars_are_plain_words(helps) -> None:
    for path, text in helps.items():
        typed = re.findall(r"<(?:bool|int|float|str|path|text|list\[[^\]]*\])[^>]*>", text)
        assert not typed, (path, typed)  # typer's '<bool>', '<list[str]>' ...
        usage = next(line for line in text.splitlines() if "Usage:" in line)
        assert "{" not in usage, (path, usage)  # typer's '{store}' for a required argument


def test_no_help_points_to_files_a_user_does_not_have(helps) -> None:
    for path, text in helps.items():
        flat = " ".join(text.split())
        assert "DESIGN" not in flat, path
        for match in re.finditer("§", flat):
            assert "paper" in flat[max(0, match.start() - 25) : match.start()], (
                path,
                flat[match.start() - 40 :][:60],
            )


def _examples(text: str) -> list[list[str]]:
    """The indented ``triage …`` lines of a help's examples, split as a shell would."""
    lines = [line.strip() for line in text.splitlines() if re.match(r" {3,}triage\b", line)]
    return [shlex.split(line.split(" | ")[0]) for line in lines]


def test_every_help_names_an_example_that_the_cli_accepts(helps) -> None:
    tree = _tree()
    for path, text in helps.items():
        assert re.search(r"^ {3,}triage\b", text, re.MULTILINE), (path, "no indented example line")
        examples = _examples(text)
        assert examples and "Example" in text, path
        for words in examples:
            _check_example(tree, path, words)


def _check_example(tree: dict[str, object], path: str, words: list[str]) -> None:
    """The example's command exists and each ``--option`` it uses is one of that command's."""
    words = words[1:]  # "triage"
    command: list[str] = []
    while words and " ".join([*command, words[0]]) in tree:
        command.append(words.pop(0))
    target = tree[" ".join(command)]
    if getattr(target, "commands", None):
        assert not words or words[0].startswith("-"), (path, command, words)
        return
    known = {opt for p in target.params for opt in (*p.opts, *p.secondary_opts)}  # type: ignore[attr-defined]
    used = [w for w in words if w.startswith("--")]
    unknown = [w for w in used if w.split("=")[0] not in known]
    assert not unknown, (path, " ".join(command), unknown)


def test_every_option_says_what_it_is_and_output_files_are_named_alike() -> None:
    for path, command in _tree().items():
        for param in command.params:  # type: ignore[attr-defined]
            name = (param.opts or [param.name])[0]
            assert (param.help or "").strip(), f"{path} {name}: no help text"
            if param.param_type_name == "option" and name in {"--json", "--html", "--jsonl", "--out"}:
                assert param.is_flag or param.metavar == "OUT", (path, name, param.metavar)
            if name in {"store", "path", "--store"}:
                assert param.metavar == "STORE", (path, name, param.metavar)


def test_help_texts_do_not_depend_on_the_terminal_width() -> None:
    """A wider terminal rewraps the same words: the text is not written for one width."""
    from typer.testing import CliRunner

    narrow = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "80"}).output
    wide = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "160"}).output

    def words(text: str) -> list[str]:
        return [w for w in re.split(r"[\s│╭╮╰╯─]+", text) if w]

    assert words(narrow) == words(wide)
    assert max(len(line) for line in wide.splitlines()) > WIDTH


def test_docs_cli_lists_every_command() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    leaves = [path for path, command in _tree().items() if path and not getattr(command, "commands", None)]
    missing = [path for path in leaves if f"`triage {path}" not in doc]
    assert not missing, missing


# --------------------------------------------------------------------------- triage-lightrag-server


@pytest.mark.skipif(shutil.which("triage-lightrag-server") is None, reason="console script not installed")
def test_lightrag_server_help_exits_0_and_names_an_example() -> None:
    proc = subprocess.run(
        ["triage-lightrag-server", "--help"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_plain_env(),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    ours = proc.stdout.split("\nusage:")[0]  # what follows is lightrag-server's own argparse help
    assert "--triage-store" in ours and "usage:" in proc.stdout
    _lightrag_block_reads_at_80(ours)


def _lightrag_block_reads_at_80(ours: str) -> None:
    wide = [line for line in ours.splitlines() if len(line) > WIDTH]
    assert not wide, wide
    assert re.search(r"^ +triage-lightrag-server ", ours, re.MULTILINE), "no example in the help"
