"""``python -m dperm``: the ``dperm`` command line (:func:`dperm.cli.main`)."""

from .cli import main

main()
