"""Everything that touches Spark or checkpoint files; errors are wrapped here (errors.py)."""
