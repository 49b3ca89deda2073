"""``colbench health``: every node checked in one launched job, the bad one named.

- :mod:`.options`, :mod:`.config`: the options, the levels and how long each takes.
- :mod:`.checks`: every rank's share: each node alone, every node's own ranks at once,
  pairs of nodes (sendrecv rail by rail, all_reduce over both nodes' ranks), the whole
  world.
- :mod:`.task`: a health run as a rank task of colbench.host.
- :mod:`.judge`: WARN and CRITICAL nodes, against the fleet (p2p's rules, the
  straggler test) or against floors.
- :mod:`.naming`: which GPU and NIC a finding is about, where the run can tell.
- :mod:`.floors`: ``colbench health learn``: floors per check with their false-alarm rates.
- :mod:`.report`, :mod:`.heatmap`: health.jsonl, health.prom, health.png, the table,
  the drain list.
- :mod:`.command`: what the CLI calls.
"""
