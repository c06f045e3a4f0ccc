"""The ``dperm`` command line as a whole: the entry points (``dperm``, ``python -m
dperm``, ``python -m dperm.cli``), one-line errors with exit status 2, the
account/calibrate/audit wiring and the light imports of ``dperm --help``.
``dperm fit`` itself is tested in ``test_cli_fit.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dperm.cli import main


def _run_main(argv, capsys):
    """Run the console entry point in-process; (exit code, stdout, stderr)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def files(tmp_path):
    """Paths the bad-input cases name: broken CSV and schema files, a plain file."""
    paths = {
        "empty": tmp_path / "empty.csv",
        "header": tmp_path / "header.csv",
        "good": tmp_path / "good.csv",
        "bad_json": tmp_path / "bad.json",
        "a_file": tmp_path / "a_file",
    }
    paths["empty"].write_text("")
    paths["header"].write_text("a,y\n")
    paths["good"].write_text("a,y\n" + "".join(f"{i % 7},{i % 2}\n" for i in range(40)))
    paths["bad_json"].write_text("{a: [0, 1]")
    paths["a_file"].write_text("x")
    return {"tmp": tmp_path, **paths}


_FIT_GOOD = ["fit", "--csv", "{good}", "--target", "y", "--classes", "0,1"]

#: (argv, a word of the one error line); "{name}" stands for the path files[name]
BAD_INPUTS = [
    (["fit", "--epsilon", "-1"], "epsilon"),
    (["fit", "--epsilon", "abc"], "--epsilon"),
    (["fit", "--delta", "1.5"], "delta"),
    (["fit", "--no-such-option"], "no-such-option"),
    (["fit", "--dataset", "nope"], "available"),
    (["fit", "--mechanism", "nope"], "registered"),
    (["fit", "--model", "tree"], "model"),
    (["fit", "--data-norm", "0"], "--data-norm"),
    (["account"], "noise-multiplier"),
    (["fit", "--dataset", "adult", "--data-home", "{tmp}"], "adult"),  # its file is missing
    # the noise is ~1e300: the perturbed objective cannot be minimized, nothing is released
    # (objective perturbation named: the default, auto, picks DP-SGD on this data)
    (["fit", "--epsilon", "1e-300", "--mechanism", "objective"], "exact minimizer"),
    (["fit", "--csv", "{empty}", "--target", "y", "--classes", "0,1"], "empty"),
    (
        ["fit", "--csv", "{header}", "--target", "y", "--classes", "0,1", "--bounds", "a=0:7"],
        "no rows",
    ),
    (
        ["fit", "--csv", "{good}", "--target", "nope", "--classes", "0,1", "--bounds", "a=0:7"],
        "nope",
    ),
    # the task and the labels are never read off the file: the options that decide them
    (["fit", "--csv", "{good}", "--target", "y", "--bounds", "a=0:7"], "--classes"),
    ([*_FIT_GOOD, "--bounds", "a=0:7", "--bounds", "zz=0:1"], "zz"),
    ([*_FIT_GOOD, "--bounds", "a=0"], "lo:hi"),
    ([*_FIT_GOOD, "--bounds", "a=7:0"], "lo < hi"),
    ([*_FIT_GOOD, "--bounds", "a=x:y"], "two numbers"),
    ([*_FIT_GOOD, "--bounds", "{tmp}/missing.json"], "missing.json"),
    ([*_FIT_GOOD, "--bounds", "{bad_json}"], "not valid JSON"),
    ([*_FIT_GOOD, "--bounds", "a=0:7", "--categories", "a="], "categories"),
    (_FIT_GOOD, "no public bound"),
    ([*_FIT_GOOD, "--bounds", "a=0:7", "--multi-class", "nope"], "multi_class"),
    (["fit", "--bounds", "a=0:1"], "--csv"),
    (["bench", "--out", "{a_file}/sub"], "not a writable folder"),
    (["bench", "--out", "{a_file}"], "not a writable folder"),
]


@pytest.mark.parametrize(("argv", "needle"), BAD_INPUTS, ids=lambda v: " ".join(v)[:60])
def test_errors_are_one_line_with_exit_code_2(argv, needle, files, capsys):
    argv = [a.format(**files) for a in argv]
    code, out, err = _run_main(argv, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (argv, err)
    assert len(lines) == 1 and lines[0].startswith("dperm: error:"), lines
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err and out == ""


@pytest.mark.skipif(
    getattr(os, "geteuid", lambda: 0)() == 0, reason="root can write into a read-only folder"
)
def test_bench_out_in_an_unwritable_folder(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    code, _, err = _run_main(["bench", "--out", str(ro / "x")], capsys)
    assert code == 2 and "not a writable folder" in err and len(err.strip().splitlines()) == 1


def test_account_and_calibrate_wiring(capsys):
    code, out, _ = _run_main(
        ["account", "--noise-multiplier", "2.0", "--delta", "1e-5", "--json"], capsys
    )
    assert code == 0
    acc = json.loads(out)
    assert acc["accountant"] == "rdp" and 0 < acc["epsilon"] < 10
    code, out, _ = _run_main(["calibrate", "--epsilon", "1.0", "--delta", "1e-5", "--json"], capsys)
    assert code == 0
    cal = json.loads(out)
    assert cal["noise_multiplier"] > 0 and cal["achieved_epsilon"] <= 1.0 + 1e-9


def test_no_arguments_prints_help(capsys):
    code, out, _ = _run_main([], capsys)
    assert code == 0 and "fit" in out and "calibrate" in out


@pytest.mark.parametrize("module", ["dperm.cli", "dperm"])
def test_console_script_module_entry_point(module):
    proc = subprocess.run(
        [sys.executable, "-m", module, "fit", "--epsilon", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "epsilon must be > 0" in proc.stderr


def test_audit_list_prints_every_registered_runner_and_missing_options_exit_2(capsys):
    from dperm.audit import available_runners

    code, out, _ = _run_main(["audit", "--list"], capsys)
    assert code == 0
    listed = [ln.split()[0] for ln in out.splitlines() if ln.startswith("  ") and ln.strip()]
    assert sorted(n for n in listed if n != "(none") == sorted(available_runners())
    assert {"objective", "dp-sgd", "adassp", "tukey", "dual-frank-wolfe"} <= set(listed)
    code, _, err = _run_main(["audit", "--epsilon", "1"], capsys)
    assert code == 2
    assert "--mechanism" in err and len(err.strip().splitlines()) == 1


def test_slow_steps_report_progress_on_stderr(capsys):
    import time

    from dperm.cli._common import step

    with step("quick", threshold=0.5):
        pass
    assert capsys.readouterr().err == ""
    with step("slow", threshold=0.05):
        time.sleep(0.2)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "dperm: slow …" and err[1].startswith("dperm: slow done (")


def _imported_by(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    probe = f"{code}; import sys; print(sorted(m for m in {modules!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().replace("'", '"'))


def test_help_imports_no_library_and_account_no_heavy_modules():
    # `dperm --help`: typer and the command modules only, the library is imported by a
    # command when it runs
    heavy = ("numpy", "dperm.accounting", "dperm.estimators", "dperm.datasets", "sklearn")
    assert _imported_by("import dperm.cli", heavy) == []
    # `dperm account` / `calibrate`: the accountants, without scipy.optimize & co.
    code = "import dperm.cli.account, dperm.cli.calibrate, dperm.accounting"
    assert _imported_by(code, ("scipy.optimize", "scipy.sparse", "sklearn", "pandas")) == []
