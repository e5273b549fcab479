"""``python examples/wikiqa/prepare.py ARGS``: the converter :mod:`rankkit.datasets.wikiqa` (same arguments)."""

from rankkit.datasets.wikiqa import main

if __name__ == "__main__":
    main()
