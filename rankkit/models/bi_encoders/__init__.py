"""Bi-encoders: query and document encoded apart, scored by inner product (dense first stage)."""
