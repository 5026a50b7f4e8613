"""Facts about the machine a study runs on (config/clusters/<name>.yaml): cores, GPUs and
memory per node, hardware threads per core, how many nodes, queues with their limits and charge rates, modules, MPI
defaults. The local cluster says `auto`: this machine's cores, memory and GPUs.

Memory numbers (`mem_per_node_gib`, `gpu_memory_gib`, `jobfs_gib`) are the site's request
numbers, in the unit batch systems and GPU vendors write "GB" in: 2^30 bytes (PBS's `mem=190GB`,
Slurm's `--mem=190G`, "A100-40GB"); requests are written with them as they are. Where they meet
the memory model they are converted to GB = 10^9 bytes (`Cluster.device_memory`, model.units).
Their names end in `_gib`, as every 2^30-byte figure's does; `_gb` is 10^9 bytes (records, tables)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model.errors import SweepError, did_you_mean
from ..model.paths import cluster_file, clusters_dir
from ..model.rank_probe import parse_cpu_list
from ..model.timefmt import hms_seconds
from ..model.units import GIB, gib_in_gb
from .files import read_yaml
from .sweep import MPI_FLAVOURS

CHARGE_UNITS = ("core_hour", "gpu_hour")
# NVIDIA's driver lists one folder per GPU here (no subprocess, no CUDA needed to count).
NVIDIA_GPUS_DIR = "/proc/driver/nvidia/gpus"
# The kernel lists the hardware threads that share a CPU's core here (e.g. "0,48" or "0-1").
THREAD_SIBLINGS = "/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
# Memory keys named `_gb` before their unit (2^30 bytes) was spelt `_gib`: refused by name, since a
# key left under its old name would silently fall back to this machine's memory or to none.
RENAMED_KEYS = {"mem_per_node_gb": "mem_per_node_gib", "gpu_memory_gb": "gpu_memory_gib", "jobfs_gb": "jobfs_gib"}
# Where a launcher's MPI comes from (`mpi.source`, `mpi.<flavour>.source`).
MPI_SOURCES = ("site", "python_env")


@dataclass(frozen=True)
class MpiLauncher:
    flavour: str = "openmpi"
    launcher: str = "mpirun"
    oversubscribe: bool = False
    allow_run_as_root: bool = False
    extra_args: tuple[str, ...] = ()
    # Where the MPI comes from (MPI_SOURCES): the site's (its modules: launcher, libmpi and the
    # mpi4py built against it; clusters, whose fabric only the site's MPI drives) or the Python
    # environment's (pip's Open MPI on one machine, which the venv's mpi4py wheel loads).
    source: str = "site"

    @property
    def from_python_env(self) -> bool:
        return self.source == "python_env"


@dataclass(frozen=True)
class WalltimeLimit:
    """Up to `up_to` CPUs (or GPUs, on GPU queues) a job may run for `walltime_s`."""

    up_to: int
    walltime_s: int


@dataclass(frozen=True)
class Queue:
    name: str
    cores_per_node: int
    gpus_per_node: int
    mem_per_node_gib: float
    # Service units per core-hour (or per GPU-hour), times max(cores, memory share).
    charge_rate: float | None = None
    charge_unit: str = "core_hour"
    # GPU queues that tie cores to GPUs (Gadi gpuvolta: ncpus = 12 x ngpus).
    cores_per_gpu: int | None = None
    limits: tuple[WalltimeLimit, ...] = ()
    # The name given to qsub -q when it differs (ASPIRE 2A routes CPU and GPU jobs of
    # `normal` to different nodes: two queues here, one name there).
    submit_as: str | None = None
    # Memory of one GPU in the cluster file's unit (below): what a rank of a GPU point may use.
    gpu_memory_gib: float | None = None
    # Whether its GPUs compute in bfloat16 (false: V100 and older, compute capability < 8.0).
    gpu_bf16: bool = True

    @property
    def submit_name(self) -> str:
        return self.submit_as or self.name

    @property
    def mem_per_core_gib(self) -> float:
        return self.mem_per_node_gib / self.cores_per_node

    def max_walltime_s(self, ncpus: int, ngpus: int) -> int | None:
        """The longest walltime the queue accepts for this size; None: no limit known."""
        size = ngpus if self.gpus_per_node else ncpus
        for limit in sorted(self.limits, key=lambda limit: limit.up_to):
            if size <= limit.up_to:
                return limit.walltime_s
        return 0 if self.limits else None

    def max_size(self) -> int | None:
        return max((limit.up_to for limit in self.limits), default=None)


@dataclass(frozen=True)
class Cluster:
    name: str
    # The backend that submits its jobs: the `scheduler` name of one of scalestudy.scheduler's
    # backends (checked when a study loads, by scalestudy.scheduler.scheduler_for).
    scheduler: str
    cores_per_node: int
    gpus_per_node: int
    mem_per_node_gib: float
    charge_rate: float | None
    mpi: MpiLauncher = field(default_factory=MpiLauncher)
    # Hardware threads per core (SMT): 1 refuses `hyperthreads: true`; more lets a node run
    # up to this many ranks per core when a point asks for hardware threads.
    threads_per_core: int = 1
    # How many nodes a job may span; None: as many as the queues' limits allow (one machine: 1).
    nodes: int | None = None
    # Launchers of other MPI flavours, for apps built against them (config: mpi.<flavour>).
    other_mpis: Mapping[str, MpiLauncher] = field(default_factory=dict)
    # Site modules of one app (config: app_modules.<app>: [name, ...]), loaded by its rules
    # under --sdm env-modules (e.g. hoomd); `modules` are loaded for every job.
    app_modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    queues: Mapping[str, Queue] = field(default_factory=dict)
    default_queue: str | None = None
    default_gpu_queue: str | None = None
    # How qsub -l is written on PBS Pro: the name of a dialect registered in
    # scalestudy.scheduler.pbs.dialects ("gadi": ncpus=,mem=,jobfs=,storage=; "select"),
    # which also checks the name when the study loads.
    pbs_dialect: str = "select"
    project: str | None = None
    jobfs_gib: float | None = None
    storage: str | None = None
    modules: tuple[str, ...] = ()
    # Folders of modulefiles given to `module use` before `modules` load (Gadi's HPC-X: its own
    # modulefiles folder, not on the site's MODULEPATH).
    module_paths: tuple[str, ...] = ()
    job_env: Mapping[str, str] = field(default_factory=dict)
    # The batch walltime is the point's plus this margin, so that the point's own timer
    # (which still writes metrics.json) fires before the scheduler kills the job.
    walltime_margin_s: int = 0
    # Memory of one GPU where the queues do not say; None: not known (no GPU check).
    gpu_memory_gib: float | None = None

    def launcher_for(self, flavour: str) -> MpiLauncher:
        """The launcher of the MPI an app is built against; never a guess from PATH order."""
        if self.mpi.flavour == flavour:
            return self.mpi
        if flavour in self.other_mpis:
            return self.other_mpis[flavour]
        raise SweepError(
            [
                f"cluster: {cluster_file(self.name)} has no launcher for {flavour} "
                f"(mpi.flavour is {self.mpi.flavour}); add mpi.{flavour}.launcher"
            ]
        )

    def queue_name(self, gpus_per_node: int, wanted: str | None = None) -> str:
        if wanted:
            return wanted
        default = self.default_gpu_queue if gpus_per_node else self.default_queue
        return default or "default"

    def queue(self, name: str) -> Queue:
        """The named queue; a cluster without queues is one queue of its own nodes."""
        if name in self.queues:
            return self.queues[name]
        return Queue(
            name=name,
            cores_per_node=self.cores_per_node,
            gpus_per_node=self.gpus_per_node,
            mem_per_node_gib=self.mem_per_node_gib,
            charge_rate=self.charge_rate,
            gpu_memory_gib=self.gpu_memory_gib,
        )

    def device_memory(
        self, gpus_per_node: int, ranks_per_node: int, queue: str | None = None
    ) -> tuple[float | None, str]:
        """What one rank of a point may use, in GB (10^9 bytes, the memory model's unit), and of
        what: a GPU's memory on GPU points (None where the cluster file does not give it), the
        node's host memory shared by its ranks on CPU points."""
        chosen = self.queue(self.queue_name(gpus_per_node, queue))
        if gpus_per_node:
            gpu = chosen.gpu_memory_gib or self.gpu_memory_gib
            return (None if gpu is None else gib_in_gb(gpu)), "GPU"
        return gib_in_gb(chosen.mem_per_node_gib) / max(ranks_per_node, 1), "rank"

    def project_name(self, environ: Mapping[str, str] = os.environ) -> str | None:
        return self.project or environ.get("PROJECT") or None


def physical_memory_gib() -> float:
    """This machine's memory in the cluster file's unit (2^30 bytes; sysconf counts pages)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB


def detected_gpus(environ: Mapping[str, str] = os.environ, gpus_dir: str = NVIDIA_GPUS_DIR) -> int:
    """The GPUs this machine shows its processes: those NVIDIA's driver lists, narrowed by
    CUDA_VISIBLE_DEVICES where set; 0 when none is detected."""
    try:
        found = len(os.listdir(gpus_dir))
    except OSError:
        return 0
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return found
    # CUDA stops at the first invalid entry ("-1" hides every GPU).
    listed = 0
    for entry in visible.split(","):
        if not entry.strip() or entry.strip().startswith("-"):
            break
        listed += 1
    return min(found, listed)


def detected_threads_per_core(siblings: str = THREAD_SIBLINGS) -> int:
    """This machine's hardware threads per core (those sharing the core of a CPU it may run on); 1
    when the kernel does not say."""
    try:
        cpu = min(os.sched_getaffinity(0))
        return max(1, len(parse_cpu_list(open(siblings.format(cpu=cpu)).read())))
    except (OSError, ValueError):
        return 1


def queue_from_mapping(name: str, data: Mapping[str, Any], cluster: Mapping[str, Any]) -> Queue:
    def get(key: str, default: Any = None) -> Any:
        return data.get(key, cluster.get(key, default))

    return Queue(
        name=name,
        cores_per_node=int(get("cores_per_node")),
        gpus_per_node=int(get("gpus_per_node", 0)),
        mem_per_node_gib=float(get("mem_per_node_gib")),
        charge_rate=None if data.get("charge_rate") is None else float(data["charge_rate"]),
        charge_unit=data.get("charge_unit", "core_hour"),
        cores_per_gpu=data.get("cores_per_gpu"),
        submit_as=data.get("submit_as"),
        gpu_memory_gib=None if get("gpu_memory_gib") is None else float(get("gpu_memory_gib")),
        gpu_bf16=get("gpu_bf16", True),
        limits=tuple(
            WalltimeLimit(int(item["up_to"]), hms_seconds(item["walltime"])) for item in data.get("limits") or ()
        ),
    )


def from_mapping(data: Mapping[str, Any]) -> Cluster:
    cores = data.get("cores_per_node", "auto")
    memory = data.get("mem_per_node_gib", "auto")
    gpus = data.get("gpus_per_node", 0)
    threads = data.get("threads_per_core", 1)
    data = {
        **data,
        "cores_per_node": (os.cpu_count() or 1) if cores == "auto" else int(cores),
        "mem_per_node_gib": round(physical_memory_gib(), 1) if memory == "auto" else float(memory),
        "gpus_per_node": detected_gpus() if gpus == "auto" else int(gpus),
        "threads_per_core": detected_threads_per_core() if threads == "auto" else int(threads),
    }
    mpi = dict(data.get("mpi") or {})
    others = {flavour: mpi.pop(flavour) for flavour in MPI_FLAVOURS if isinstance(mpi.get(flavour), Mapping)}
    mpi["extra_args"] = tuple(str(a) for a in mpi.get("extra_args") or ())
    queues = {name: queue_from_mapping(name, spec or {}, data) for name, spec in (data.get("queues") or {}).items()}
    return Cluster(
        name=data["name"],
        scheduler=data.get("scheduler", "none"),
        cores_per_node=data["cores_per_node"],
        gpus_per_node=data["gpus_per_node"],
        mem_per_node_gib=data["mem_per_node_gib"],
        charge_rate=None if data.get("charge_rate") is None else float(data["charge_rate"]),
        mpi=MpiLauncher(**mpi),
        threads_per_core=data["threads_per_core"],
        nodes=None if data.get("nodes") is None else int(data["nodes"]),
        queues=queues,
        default_queue=data.get("default_queue"),
        default_gpu_queue=data.get("default_gpu_queue"),
        pbs_dialect=data.get("pbs_dialect", "select"),
        project=data.get("project"),
        jobfs_gib=data.get("jobfs_gib"),
        storage=data.get("storage"),
        modules=tuple(map(str, data.get("modules") or ())),
        module_paths=tuple(os.path.expandvars(str(path)) for path in data.get("module_paths") or ()),
        job_env={str(k): str(v) for k, v in (data.get("job_env") or {}).items()},
        walltime_margin_s=hms_seconds(data.get("walltime_margin", "00:00:00")),
        gpu_memory_gib=None if data.get("gpu_memory_gib") is None else float(data["gpu_memory_gib"]),
        app_modules={app: tuple(map(str, names or ())) for app, names in (data.get("app_modules") or {}).items()},
        other_mpis={
            flavour: MpiLauncher(
                **{**settings, "flavour": flavour, "extra_args": tuple(map(str, settings.get("extra_args") or ()))}
            )
            for flavour, settings in others.items()
        },
    )


def problems_of(cluster: Cluster) -> list[str]:
    where = cluster_file(cluster.name)
    problems = []
    if cluster.threads_per_core < 1:
        problems.append(f"{where}: threads_per_core {cluster.threads_per_core}; use 1 (no SMT) or more, or auto")
    for key in ("default_queue", "default_gpu_queue"):
        name = getattr(cluster, key)
        if cluster.queues and name and name not in cluster.queues:
            problems.append(f"{where}: {key} {name!r} is not among queues: {', '.join(cluster.queues)}")
    for key, launcher in (("mpi", cluster.mpi), *((f"mpi.{f}", m) for f, m in cluster.other_mpis.items())):
        if launcher.source not in MPI_SOURCES:
            problems.append(f"{where}: {key}.source {launcher.source!r}; allowed: {', '.join(MPI_SOURCES)}")
    for queue in cluster.queues.values():
        if not isinstance(queue.gpu_bf16, bool):
            problems.append(f"{where}: queues.{queue.name}.gpu_bf16 {queue.gpu_bf16!r}; allowed: true or false")
        if queue.charge_unit not in CHARGE_UNITS:
            problems.append(
                f"{where}: queues.{queue.name}.charge_unit {queue.charge_unit!r}; allowed: {', '.join(CHARGE_UNITS)}"
            )
    return problems


def renamed_key_problems(name: str, data: Mapping[str, Any]) -> list[str]:
    """A memory key under its old `_gb` name, at the top or in a queue: one line each."""
    places = [("", data)] + [(f"queues.{queue}.", spec) for queue, spec in (data.get("queues") or {}).items()]
    return [
        f"{cluster_file(name)}: {where}{old} is now {where}{new} (the same number: 2^30 bytes, as qsub's GB)"
        for where, mapping in places
        if isinstance(mapping, Mapping)
        for old, new in RENAMED_KEYS.items()
        if old in mapping
    ]


def old_mpi_key_problems(name: str, data: Mapping[str, Any]) -> list[str]:
    """`from_python_env: true|false` (before `mpi.source`), at mpi or a flavour's launcher."""
    mpi = data.get("mpi") if isinstance(data.get("mpi"), Mapping) else {}
    places = [("mpi", mpi)] + [(f"mpi.{f}", mpi[f]) for f in MPI_FLAVOURS if isinstance(mpi.get(f), Mapping)]
    return [
        f"{cluster_file(name)}: {where}.from_python_env is now {where}.source "
        f"(python_env for true, site for false); allowed: {', '.join(MPI_SOURCES)}"
        for where, mapping in places
        if "from_python_env" in mapping
    ]


def load(name: str) -> Cluster:
    directory = clusters_dir()
    path = directory / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in directory.glob("*.yaml"))
        suggestion = did_you_mean(name, known) or ";"
        raise SweepError([f"cluster: unknown cluster {name!r}{suggestion} defined in {directory}: {', '.join(known)}"])
    data = read_yaml(path)  # a YAML mistake or a key given twice: SweepError naming file and line
    renamed = renamed_key_problems(name, data) + old_mpi_key_problems(name, data)
    if renamed:
        raise SweepError(renamed)
    try:
        cluster = from_mapping(data)
    except (KeyError, TypeError, ValueError) as error:
        raise SweepError([f"{cluster_file(name)}: {error!r}"]) from error
    problems = problems_of(cluster)
    if problems:
        raise SweepError(problems)
    return cluster
