"""Click commands: each parses options, calls the library and renders the result."""
