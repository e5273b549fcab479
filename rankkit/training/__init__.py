"""Training data and training: hard-negative mining (``rankkit mine``) and, later, ``rankkit train``."""
