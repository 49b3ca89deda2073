"""``colbench fit``: the alpha-beta model per measured line, and where two models cross."""
