"""Every code block of README.md and docs/ runs as a reader pastes it (issue #21 §1).

Each page is one test: its fenced blocks run in order, in a fresh working directory
whose ``../shared/data`` is the real data folder when present (so the pages' relative
``--data-home ../shared/data`` works as in the repository). Python blocks share one
namespace per page (``__name__ == "__main__"``, as in a script); shell blocks (``bash``,
``sh``, ``shell``, and the ``$ `` lines of ``console`` transcripts) run in bash with this
environment's ``python`` and ``dperm`` first on the PATH. Blocks tagged ``text`` (diagrams,
pseudo-code, output) are not code; a fence without a language is an error, so that no
command hides in an untagged block.

The fences are found by markdown-it-py (the CommonMark parser pytest-markdown-docs uses);
the three dedicated tools do not fit this contract: pytest-markdown-docs and
pytest-examples run Python fences only, and mktestdocs runs all Python blocks of a page
before (or after) all its shell blocks, which breaks a page where a command writes the
file the next Python block reads.

Markers — an HTML comment on the line(s) just above a fence, invisible on GitHub and on the
mkdocs site (CONTRIBUTING.md, "Documentation examples")::

    <!-- docs-test: needs-data -->      needs the real data (../shared/data or
                                        $DPERM_DATA_HOME); skipped when absent
    <!-- docs-test: needs-cluster -->   needs a running Dask scheduler; runs only when
                                        $DPERM_DOCS_CLUSTER is set
    <!-- docs-test: skip REASON -->     never run here (e.g. it installs dperm into a new
                                        virtual environment: .ci/run does that); the reason
                                        is mandatory
    <!-- docs-test: exact -->           a ``console`` transcript whose output lines must
                                        appear verbatim, numbers included (a seeded,
                                        deterministic command)

A block skipped because its data or cluster is absent skips the rest of its page (later
blocks may use what it made). A shell line whose comment says ``exit N`` (e.g.
``# refused: exit 2``) must end with status N; every other command must succeed.
A ``console`` transcript's output lines must appear in the real output up to their
numbers (the first column, e.g. ``VERDICT``, is compared) — verbatim, numbers included,
under the ``exact`` marker.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from conftest import shared_data_dir

markdown_it = pytest.importorskip("markdown_it")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PYTHON = {"python", "py", "python3"}
SHELL = {"bash", "sh", "shell", "console"}
NOT_CODE = {"text", "pycon", "output", "json", "toml", "yaml", "csv", "mermaid", "md", "markdown"}
_MARKER = re.compile(r"<!--\s*docs-test:\s*(needs-data|needs-cluster|skip|exact)\b(.*?)-->", re.S)
_EXIT = re.compile(r"#.*\bexit (\d+)\b[^\n]*$")


def _blocks(page: Path) -> list[dict]:
    """The fences of ``page`` in order: language, code, first line, marker."""
    tokens = markdown_it.MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8"))
    out = []
    for i, tok in enumerate(tokens):
        if tok.type != "fence":
            continue
        marker = None
        prev = tokens[i - 1] if i else None
        if prev is not None and prev.type == "html_block":
            m = _MARKER.search(prev.content)
            if m:
                marker = (m.group(1), " ".join(m.group(2).split()))
        info = tok.info.strip().split()
        out.append(
            {
                "lang": info[0].lower() if info else "",
                "code": tok.content,
                "line": tok.map[0] + 1,
                "marker": marker,
            }
        )
    return out


def _logical_lines(code: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each command of a shell block (``\\`` joins)."""
    out, start, buf = [], None, []
    for n, line in enumerate(code.splitlines(), start=1):
        if start is None:
            start = n
        buf.append(line)
        if not line.rstrip().endswith("\\"):
            out.append((start, n, "\n".join(buf)))
            start, buf = None, []
    if buf:
        out.append((start, len(code.splitlines()), "\n".join(buf)))
    return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # this environment's python and dperm first (the venv of the test run)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    src = str(ROOT / "src")
    if src not in env.get("PYTHONPATH", "").split(os.pathsep):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env


def _run_shell(code: str, cwd: Path, where: str) -> str:
    """Run a shell block in one bash; check every command's status against its
    ``exit N`` comment (0 otherwise). Returns stdout."""
    status_file = cwd / ".docs-test-status"
    status_file.unlink(missing_ok=True)
    # one line of prelude: the ERR trap records (line, status) of every failing command
    prelude = f"trap 'echo \"$LINENO $?\" >> {shlex.quote(str(status_file))}' ERR\n"
    proc = subprocess.run(
        ["bash", "-c", prelude + code],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    failed: dict[int, int] = {}
    if status_file.exists():
        for row in status_file.read_text().split("\n"):
            if row.strip():
                line, status = row.split()
                failed[int(line) - 1] = int(status)
    problems = []
    for first, last, text in _logical_lines(code):
        want = _EXIT.search(text.splitlines()[-1])
        want_status = int(want.group(1)) if want else 0
        got = [s for ln, s in failed.items() if first <= ln <= last]
        got_status = got[-1] if got else 0
        if got_status != want_status:
            problems.append(f"`{text.strip()}` exited {got_status}, expected {want_status}")
    if problems:
        raise AssertionError(
            f"{where}: " + "; ".join(problems) + f"\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc.stdout


def _console(code: str) -> tuple[str, list[str]]:
    """The commands (``$ `` lines, ``> `` continuations) and the shown output lines."""
    commands, output = [], []
    for line in code.splitlines():
        if line.startswith("$ "):
            commands.append(line[2:])
        elif line.startswith("> ") and commands:
            commands[-1] += "\n" + line[2:]
        elif line.strip():
            output.append(line)
    return "\n".join(commands) + "\n", output


def _key(line: str) -> str:
    """The first column of a report line (before two spaces or a number)."""
    return re.split(r"\s{2,}|\d", line.strip(), maxsplit=1)[0].strip()


def _run_python(code: str, namespace: dict, where: str) -> None:
    compiled = compile(code, where, "exec")
    with warnings.catch_warnings():
        # a reader sees warnings, not errors (pytest turns them into errors)
        warnings.simplefilter("default")
        exec(compiled, namespace)


@contextlib.contextmanager
def _chdir(path: Path):
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _skip_reason(marker) -> str | None:
    if marker is None:
        return None
    kind = marker[0]
    if kind == "needs-data" and shared_data_dir() is None:
        return "needs the real data (../shared/data)"
    if kind == "needs-cluster" and not os.environ.get("DPERM_DOCS_CLUSTER"):
        return "needs a Dask cluster (set DPERM_DOCS_CLUSTER to run)"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_code_blocks_run(page, tmp_path):
    blocks = _blocks(page)
    rel = page.relative_to(ROOT)
    for b in blocks:  # the contract itself: languages and markers
        where = f"{rel}:{b['line']}"
        assert b["lang"], f"{where}: a fence without a language (use text for non-code)"
        assert b["lang"] in PYTHON | SHELL | NOT_CODE, f"{where}: unknown language {b['lang']!r}"
        if b["marker"] and b["marker"][0] == "skip":
            assert b["marker"][1], f"{where}: docs-test: skip needs a reason"
    runnable = [b for b in blocks if b["lang"] in PYTHON | SHELL]
    if not runnable:
        return
    work = tmp_path / "work"
    work.mkdir()
    data = shared_data_dir()
    if data is not None:  # the pages' ../shared/data, relative to the repository root
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "data").symlink_to(data, target_is_directory=True)
    namespace: dict = {"__name__": "__main__"}
    skipped_rest = None
    timings = []
    for b in runnable:
        where = f"{rel}:{b['line']}"
        if b["marker"] and b["marker"][0] == "skip":
            continue
        if skipped_rest is None:
            skipped_rest = _skip_reason(b["marker"])
        if skipped_rest is not None:
            continue
        t0 = time.perf_counter()
        with _chdir(work):
            if b["lang"] in PYTHON:
                _run_python(b["code"], namespace, where)
            elif b["lang"] == "console":
                commands, shown = _console(b["code"])
                out = _run_shell(commands, work, where)
                if b["marker"] and b["marker"][0] == "exact":  # the whole line, numbers too
                    flat = " ".join(out.split())
                    missing = [ln for ln in shown if " ".join(ln.split()) not in flat]
                else:
                    missing = [ln for ln in shown if _key(ln) and _key(ln) not in out]
                assert not missing, f"{where}: shown output not produced: {missing}\n{out}"
            else:
                _run_shell(b["code"], work, where)
        timings.append((where, time.perf_counter() - t0))
    sys.stderr.write("".join(f"{w}: {t:.1f} s\n" for w, t in timings))
    if skipped_rest is not None:
        pytest.skip(f"{rel}: later blocks not run: {skipped_rest}")
