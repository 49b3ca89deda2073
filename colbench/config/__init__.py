"""What the user asked for: the options machinery and tables, the frozen config
dataclasses by concern, YAML suites, variants and sizes. Adding an option is one row."""
