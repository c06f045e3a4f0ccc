"""``python -m dperm.cli``: the ``dperm`` command line (:func:`dperm.cli.main`)."""

from . import main

if __name__ == "__main__":
    main()
