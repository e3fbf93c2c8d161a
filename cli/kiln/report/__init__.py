"""Validation reports: one JSON record per run, rendered as Markdown, HTML with plots,
and JUnit XML; compared between runs."""
