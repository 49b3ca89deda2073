"""``colbench gate``: a run against a baseline (or variant B against A), verdicts that
hold beyond the noise, and the reports a CI job reads (docs/comparing.md)."""
