"""``python examples/semeval/prepare.py ARGS``: the converter :mod:`rankkit.datasets.semeval` (same arguments)."""

from rankkit.datasets.semeval import main

if __name__ == "__main__":
    main()
