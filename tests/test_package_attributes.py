"""``import dperm`` reaches every subpackage as an attribute (issue #30), lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dperm


def _fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter (no subpackage imported yet)."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return out.stdout.strip()


def test_subpackages_are_attributes_after_a_plain_import():
    code = (
        "import sys, dperm\n"
        "before = 'dperm.datasets' in sys.modules\n"
        "f = dperm.datasets.load\n"
        "print(before, callable(f), dperm.accounting.__name__, dperm.algorithms.__name__,"
        " 'dperm.networks' in sys.modules)"
    )
    assert _fresh(code) == "False True dperm.accounting dperm.algorithms False"


@pytest.mark.parametrize("name", sorted(dperm._SUBMODULES))
def test_every_listed_submodule_exists(name):
    module = getattr(dperm, name)
    assert module.__name__ == f"dperm.{name}"
    assert name in dir(dperm)


def test_unknown_attribute_still_raises():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dperm.nope  # noqa: B018
