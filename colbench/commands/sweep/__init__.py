"""``colbench sweep`` and ``colbench run``: options to config, variants, interleaved worlds,
the NCCL probe, the sweep as a task of the host and rank 0's lead; the measuring is
:mod:`colbench.bench`'s."""
