"""``colbench replay``: a job's own collective mix, read from its traces, measured here.

traces.py reads the files (calls.py is what one traced call is, formats.py the formats),
plan.py turns the calls into colbench's (op, size, dtype, group) with how often the job
made each, command.py sweeps exactly those, compares the prediction with the job's own
durations and writes the suite. See docs/replay.md.
"""
