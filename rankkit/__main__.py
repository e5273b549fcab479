"""``python -m rankkit``."""

from rankkit.cli import main

if __name__ == "__main__":
    main()
