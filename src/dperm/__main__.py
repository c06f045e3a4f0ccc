"""``python -m dperm``: the ``dperm`` command line (:func:`dperm.cli.main`)."""

from .cli import main

if __name__ == "__main__":
    main()
