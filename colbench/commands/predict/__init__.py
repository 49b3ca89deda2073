"""`colbench predict`: cost models of collectives fitted on measured runs, predicted at
world sizes not measured, checked against runs that were (docs/predict.md)."""
