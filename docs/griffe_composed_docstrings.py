"""Griffe extension: show the docstrings that dperm composes at import time.

The estimators' class docstrings are completed at import time by
:func:`dperm.estimators._params.estimator_doc` (the shared ``Parameters``
entries, the ``Attributes`` section).  Griffe reads the source statically and
would show only the summary written in the class body; for a class whose
runtime docstring extends the static one, this extension shows the runtime
docstring.  Enabled in ``mkdocs.yml`` under the python handler's options::

    extensions:
      - docs/griffe_composed_docstrings.py
"""

from __future__ import annotations

import inspect

import griffe


class ComposedDocstrings(griffe.Extension):
    """Replace a decorated class's static docstring by its runtime one when the
    runtime docstring starts with the static text (up to its Examples) and adds
    to it."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        static = cls.docstring
        if static is None or not cls.decorators:
            return
        try:
            runtime = inspect.getdoc(griffe.dynamic_import(cls.path))
        except ImportError:
            return
        head = static.value.partition("\nExamples\n")[0].rstrip()
        if runtime and runtime != static.value and runtime.startswith(head):
            static.value = runtime
