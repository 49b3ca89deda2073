"""``colbench plot`` and ``sweep --plot``: measured lines against message size."""
