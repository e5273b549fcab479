"""``python examples/classic/prepare.py ARGS``: the converter :mod:`rankkit.datasets.classic` (same arguments)."""

from rankkit.datasets.classic import main

if __name__ == "__main__":
    main()
