"""Griffe extension: show the docstrings and signatures that dperm composes at import time.

The estimators' class docstrings are completed at import time by
:func:`dperm.estimators._params.estimator_doc` (the shared ``Parameters``
entries, the ``Attributes`` section), and the linear estimators' ``__init__`` is
built from their parameter table by
:func:`dperm.estimators._params.estimator_parameters` (an explicit signature, no
source).  Griffe reads the source statically and would show only the summary
written in the class body and no parameters; for such a class this extension
shows the runtime docstring and adds the runtime ``__init__`` signature.  Likewise
for a function or method whose docstring names a shared fragment on a line of its
own (``{name}``, filled by :func:`dperm._docstrings.compose_doc` at import time):
the extension shows the composed runtime docstring.  Enabled in ``mkdocs.yml``
under the python handler's options::

    extensions:
      - docs/griffe_composed_docstrings.py
"""

from __future__ import annotations

import inspect

import griffe

from dperm._docstrings import PLACEHOLDER


def _runtime_init(cls: griffe.Class, runtime: type) -> None:
    """Add the ``__init__`` that the class got at import time (its ``__signature__``)."""
    init = vars(runtime).get("__init__")
    signature = getattr(init, "__signature__", None)
    if signature is None or "__init__" in cls.members:
        return
    parameters = griffe.Parameters(
        *(
            griffe.Parameter(
                p.name,
                kind=griffe.ParameterKind(p.kind.description),
                annotation=None if p.annotation is p.empty else str(p.annotation),
                default=None if p.default is p.empty else repr(p.default),
            )
            for p in signature.parameters.values()
        )
    )
    cls.set_member("__init__", griffe.Function("__init__", parameters=parameters, returns="None"))


class ComposedDocstrings(griffe.Extension):
    """Replace a decorated class's static docstring by its runtime one when the
    runtime docstring starts with the static text (up to its Examples) and adds
    to it; add the ``__init__`` a decorator built."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        static = cls.docstring
        if static is None or not cls.decorators:
            return
        try:
            runtime = griffe.dynamic_import(cls.path)
        except ImportError:
            return
        _runtime_init(cls, runtime)
        doc = inspect.getdoc(runtime)
        head = static.value.partition("\nExamples\n")[0].rstrip()
        if doc and doc != static.value and doc.startswith(head):
            static.value = doc

    def on_function_instance(self, *, func: griffe.Function, **kwargs) -> None:
        """Show the composed runtime docstring of a function whose source names a
        fragment (``{name}`` on a line of its own)."""
        static = func.docstring
        if static is None or not PLACEHOLDER.search(static.value):
            return
        try:
            runtime = griffe.dynamic_import(func.path)
        except ImportError:
            return
        doc = inspect.getdoc(runtime)
        if doc and not PLACEHOLDER.search(doc):
            static.value = doc
