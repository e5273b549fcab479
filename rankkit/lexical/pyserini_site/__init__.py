"""Never imported as a package: ``rankkit env`` puts this folder on ``PYTHONPATH`` for its ``sitecustomize.py``.

This file only makes the folder a package, so that a wheel ships it (setuptools finds packages).
"""
