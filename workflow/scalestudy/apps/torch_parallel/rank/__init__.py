"""What every MPI rank of a torch-parallel point runs (`python -m scalestudy.apps.torch_parallel.rank`).

`models`: the plain-torch models, each a sequence of blocks (so a pipeline can split it),
sized by width and depth, and the deterministic learnable data each one trains on.
`train` (the `__main__`): the process group from the MPI environment, the strategy
(ddp, fsdp, pipeline, tensor, hybrid), the throughput or converge loop and the lines the
app parses. This package's modules import torch at their top: nothing imports them but
the rank program itself and the app's memory shape (inside a function).
"""
