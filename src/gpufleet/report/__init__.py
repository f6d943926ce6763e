"""Rendering results: tables (rich), JSON, plots (matplotlib) and the HTML report."""
