"""Long-document re-rankers: documents split into passages, passage vectors or scores aggregated."""
