"""rankkit: multi-stage neural text ranking from the command line."""

__version__ = "0.1.0"
