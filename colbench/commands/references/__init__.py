"""Published results for named hardware, and a run placed against them (issue 38)."""
