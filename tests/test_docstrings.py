"""Docstrings composed from shared fragments (dperm._docstrings)."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

import pytest

import dperm
from dperm._docstrings import PLACEHOLDER, compose_doc, fill_fragments

FRAGMENT = """
    x : float
        First line.

        Second paragraph.
"""


def test_a_fragment_takes_the_indentation_of_its_line():
    doc = "Summary.\n\n    Parameters\n    ----------\n    {x}\n    y : int\n"
    out = fill_fragments(doc, {"x": FRAGMENT})
    assert out == (
        "Summary.\n\n    Parameters\n    ----------\n    x : float\n        First line.\n\n"
        "        Second paragraph.\n    y : int\n"
    )


def test_a_missing_or_unused_fragment_is_an_error():
    with pytest.raises(KeyError, match="'x'"):
        fill_fragments("Summary.\n\n    {x}\n", {})
    with pytest.raises(ValueError, match="'y'"):
        fill_fragments("Summary.\n\n    {x}\n", {"x": "a", "y": "b"})


def test_only_a_name_alone_on_its_line_is_a_placeholder():
    doc = "Labels in {0, 1}; a set {x} inline.\n\n    {x} and more\n"
    assert fill_fragments(doc, {}) == doc


def test_compose_doc_under_singledispatch_and_wraps():
    @functools.singledispatch
    @compose_doc(x=FRAGMENT)
    def rule(event):
        """Rule.

        {x}
        """

    @functools.wraps(rule)
    def wrapper(*args):
        return rule(*args)

    for f in (rule, wrapper):
        assert "x : float\n    First line." in inspect.getdoc(f)
        assert not PLACEHOLDER.search(f.__doc__)


def test_a_stripped_docstring_stays_none():
    def f():
        pass

    assert compose_doc()(f).__doc__ is None


def _public_objects():
    for info in pkgutil.walk_packages(dperm.__path__, prefix="dperm."):
        if info.name == "dperm.__main__":
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != info.name:
                continue
            yield f"{info.name}.{name}", obj
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    yield f"{info.name}.{name}.{attr}", member


def test_no_docstring_of_the_package_keeps_an_unfilled_fragment():
    """Every ``{name}`` line was filled at import time (help() and the API reference
    never show a placeholder)."""
    unfilled = [
        path
        for path, obj in _public_objects()
        if isinstance(getattr(obj, "__doc__", None), str) and PLACEHOLDER.search(obj.__doc__)
    ]
    assert unfilled == []
