"""``python examples/quora/prepare.py ARGS``: the converter :mod:`rankkit.datasets.quora` (same arguments)."""

from rankkit.datasets.quora import main

if __name__ == "__main__":
    main()
