"""rankkit's version, in a module of its own so that any layer can record it without importing the
package root (whose lazy Python API sits above everything)."""

__version__ = "0.2.0"
