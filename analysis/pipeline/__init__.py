"""Queries chained through tables: a pipeline found under a root, its hops, how far each lags."""
