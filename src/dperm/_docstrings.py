"""Docstrings that share a fragment: a text written once, composed into each docstring.

Where several public functions document a parameter (or a group of parameters, a
``Returns`` entry, a paragraph) identically, the text is one *fragment*, kept next to
the concept it documents, and each docstring names it on a line of its own,
``{name}``, indented as the text stands there.  :func:`compose_doc` fills those lines
when the module is imported, so ``help()``, :func:`inspect.getdoc`, the doctests and
the API reference (through ``docs/griffe_composed_docstrings.py``) show the composed
text.  A fragment is written at any indentation (it is cleaned with
:func:`inspect.cleandoc`) and may span several lines; it takes the indentation of
the line it replaces.  A line naming no fragment given, or a fragment that no line
names, is an error at import time: the text cannot drop out silently.

Examples
--------
>>> from dperm._docstrings import compose_doc
>>> SEED = '''
... random_state : None, int or Generator
...     Source of the noise (None = fresh OS entropy).
... '''
>>> @compose_doc(seed=SEED)
... def draw(random_state=None):
...     '''One draw.
...
...     Parameters
...     ----------
...     {seed}
...     '''
>>> print(draw.__doc__.strip())
One draw.
<BLANKLINE>
    Parameters
    ----------
    random_state : None, int or Generator
        Source of the noise (None = fresh OS entropy).
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = ["PLACEHOLDER", "TRANSFORMER_FIT", "compose_doc", "fill_fragments"]

T = TypeVar("T")

#: a line that names a fragment: ``{name}`` alone on its line (any indentation)
PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>[A-Za-z_]\w*)\}[ \t]*$", re.MULTILINE)

#: ``fit(X, y=None)`` of a transformer of numeric features (scikit-learn's contract:
#: ``y`` is accepted for pipelines and ignored; ``fit`` returns the transformer)
TRANSFORMER_FIT = """
Parameters
----------
X : array-like of shape (n_samples, n_features)
y : ignored

Returns
-------
self
"""


def fill_fragments(doc: str, fragments: Mapping[str, str]) -> str:
    """``doc`` with every ``{name}`` line replaced by ``fragments[name]``, indented
    like that line.

    Raises
    ------
    KeyError
        A line names a fragment that is not given.
    ValueError
        A fragment given is named by no line.
    """
    used: set[str] = set()

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in fragments:
            raise KeyError(f"the docstring names the fragment {name!r}, which is not given")
        used.add(name)
        return textwrap.indent(inspect.cleandoc(fragments[name]), match["indent"])

    out = PLACEHOLDER.sub(fill, doc)
    unused = sorted(set(fragments) - used)
    if unused:
        raise ValueError(f"no line of the docstring names the fragments {unused}")
    return out


def compose_doc(**fragments: str) -> Callable[[T], T]:
    """A decorator that fills the ``{name}`` lines of the docstring of a function or
    class with the fragments given (:func:`fill_fragments`).  Under
    :func:`functools.singledispatch` or :func:`functools.wraps`, put it innermost: the
    wrapper copies the composed text.  A docstring stripped (``python -OO``) stays
    None."""

    def decorate(obj: T) -> T:
        if obj.__doc__ is not None:
            obj.__doc__ = fill_fragments(obj.__doc__, fragments)
        return obj

    return decorate
