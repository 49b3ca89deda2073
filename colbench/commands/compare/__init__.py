"""``colbench compare``: two runs side by side, with no checks (docs/comparing.md)."""
