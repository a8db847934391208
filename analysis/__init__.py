"""Diagnoses and views as plain functions over checkpoint facts, Arrow tables and DuckDB.

Nothing here imports streamlit or starts Spark: every function takes data and returns data.
"""
