"""The one memory unit: GB = 10^9 bytes, in every figure, table, plot and check.

It is what LitGPT prints for CUDA memory (torch.cuda.max_memory_allocated() / 1e9) and what
the ZeRO paper's and LitGPT's published tables use, which the memory model (model.memory) is
held against. Other units come in (and go out) at a few boundaries, each converted there with
a comment naming the foreign unit:

- batch systems' "GB" is 2^30 bytes (PBS's "gb": qsub `mem=190GB`, Gadi's usage block
  "Memory Used: 187.65GB"; Slurm's "G"), and so are a cluster file's memory numbers, which are
  the site's request numbers and are written to the scheduler as they are
  (config.clusters: `Cluster.device_memory` converts them for the memory check);
- the kernel counts bytes (sysconf) or KiB (getrusage's ru_maxrss, /proc), Snakemake's
  mem_mb MB (10^6 bytes); Snakemake's Slurm plugin writes mem_mb as `sbatch --mem N`, which
  Slurm reads as MiB (2^20 bytes): the run rules give it in MiB (planning.run_rules.point_resources).

One name per unit: a name ending `_gb` is GB (10^9 bytes), in every record, table and figure;
one ending `_gib` is 2^30 bytes, the batch systems' "GB" (a cluster file's `mem_per_node_gib`,
`gpu_memory_gib`, `jobfs_gib`; `JobRequest.mem_gib`; a published record's `memory_used_gib`).
"""

from __future__ import annotations

GB = 10**9  # bytes
GIB = 2**30  # bytes: a batch system's (and a cluster file's) "GB"
KIB = 2**10  # bytes: getrusage's ru_maxrss on Linux
MB = 10**6  # bytes: Snakemake's mem_mb
MIB = 2**20  # bytes: Slurm's "M", the unit of `sbatch --mem N` (which the Slurm plugin writes mem_mb as)

# How every memory figure's unit is spelt (model.metrics.declare, table headers).
MEMORY_UNIT = "GB (10^9 bytes)"


def gb(n_bytes: float) -> float:
    """Bytes in GB (10^9 bytes)."""
    return n_bytes / GB


def gib_in_gb(gib: float) -> float:
    """A batch system's (or a cluster file's) "GB", 2^30 bytes, in GB (10^9 bytes)."""
    return gib * GIB / GB
