"""``python -m dperm.cli``: the ``dperm`` command line (:func:`dperm.cli.main`)."""

from . import main

main()
