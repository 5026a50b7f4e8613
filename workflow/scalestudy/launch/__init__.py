"""The launch/runner layer: everything that happens inside a run job (the state of the
results directory between jobs, what is finished, kept and locked, is scalestudy.bookkeeping).

command.py     the launcher's argument list (Open MPI mpirun or MPICH Hydra), launch.sh
runner.py      run one point: launch, time, classify, parse, always write metrics.json
provenance.py  what a run ran on, and proof that its MPI flags and NCCL variables took effect
failures.py    the category and reason of a failed run
"""
