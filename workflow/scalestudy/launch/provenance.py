"""What a run ran on, and proof that its MPI flags and NCCL variables took effect.

Before the run: the MPI launcher (`mpirun --version`, flavour), loaded environment
modules, a hash of the installed Python packages. After the run, from its own output:
each rank's host and the OMPI_*/NCCL_* variables it saw (rank_probe.py lines), the
MCA parameters Open MPI really registered (`--mca mpi_show_mca_params enviro`, written
by rank 0 to mca-params.txt at MPI_Init), the NCCL version NCCL printed.

`settings_proof(...)` compares that evidence with what the point asked for. An Open MPI
parameter that no component registered had no effect (Open MPI accepts `--mca
coll_hcoll_enable 1` silently where hcoll is absent); a variable a rank did not see
never reached it. A binding is proven by each rank's own CPU affinity (the rank probe's,
beside its launcher's): a rank left free on every CPU was not bound. metrics.json
`settings_proof.verified` is false when anything the point asked for is missing from the
proof, and `settings_proof.problems` says what; `settings_proof.bindings` where each rank ran.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from ..model import rank_probe
from ..model.mpi import mpi_identity
from ..model.point import DEFAULT_PLACEMENT
from ..model.rank_probe import RENDEZVOUS_PREFIX, parse_cpu_list, rank_lines
from . import modules

PROBE_PATH = str(Path(rank_probe.__file__).resolve())
MCA_PARAMS_FILE = "mca-params.txt"
MCA_LINE = re.compile(r"^([A-Za-z0-9_]+)=(.*) \((\w+)\)$", re.M)
NCCL_VERSION = re.compile(r"NCCL version (\S+)")
TRUE, FALSE = {"1", "true", "yes", "on", "enabled"}, {"0", "false", "no", "off", "disabled"}


# ---------------------------------------------------------------- before the run


def probed_command(
    rank_argv: list[str], python: str, also: list[str] | tuple[str, ...] = (), mpi4py: bool = False
) -> list[str]:
    """The rank command behind rank_probe.py, which reports the rank (and the variables
    `also`, besides its usual prefixes; with `mpi4py`, the MPI library mpi4py loads there) and
    then exec()s it."""
    return [
        python,
        PROBE_PATH,
        *(["--also", ",".join(also)] if also else []),
        *(["--mpi4py"] if mpi4py else []),
        "--",
        *rank_argv,
    ]


def variables_to_report(point, flavour: str | None) -> list[str]:
    """Variables a point sets that the probe's prefixes might miss: an environment-variable
    MPI flag set (MPICH), and the NCCL set."""
    names = list(point.nccl_env)
    if flavour != "openmpi":
        names += list(point.mpi_flags)
    return names


def nccl_version_env(point) -> dict[str, str]:
    """On GPU points, NCCL_DEBUG=VERSION makes NCCL print its version line (nothing else),
    unless the point's own NCCL set chooses NCCL_DEBUG."""
    if point.gpus_per_node and "NCCL_DEBUG" not in point.nccl_env:
        return {"NCCL_DEBUG": "VERSION"}
    return {}


def proof_args(flavour: str, mpi_flags: Mapping[str, str], run_dir: Path) -> list[str]:
    """Launcher arguments that make the MPI library write down the parameters it used."""
    if flavour != "openmpi" or "mpi_show_mca_params" in mpi_flags:
        return []
    (run_dir / MCA_PARAMS_FILE).unlink(missing_ok=True)  # never read a previous attempt's proof
    path = str((run_dir / MCA_PARAMS_FILE).resolve())
    return ["--mca", "mpi_show_mca_params", "enviro", "--mca", "mpi_show_mca_params_file", path]


def launcher_version(launcher: str, env: Mapping[str, str]) -> dict[str, str | None]:
    """`<launcher> --version`: what `version_said` reads of it."""
    try:
        out = subprocess.run(
            [launcher, "--version"], capture_output=True, text=True, timeout=30, env=dict(env), check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        return {"launcher": launcher, "version": None, "flavour": None, "error": str(error)}
    return version_said(launcher, out.stdout + out.stderr)


def version_said(launcher: str, text: str) -> dict[str, str | None]:
    """The launcher, its version line, the MPI flavour and the release its `--version` names.
    Hydra says its version on a line of its own: 'HYDRA build details:' is no version."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), None)
    flavour = None
    markers = (("openmpi", "Open MPI"), ("openmpi", "OpenRTE"), ("intelmpi", "Intel(R) MPI"), ("mpich", "HYDRA"))
    for name, marker in (*markers, ("mpich", "MPICH")):
        if marker in text:
            flavour = name
            break
    if flavour is None and "slurm" in text.lower():
        flavour = "slurm-srun"
    identity = mpi_identity(text)
    release = identity[1] if identity else None
    if first and release and release not in first:
        first = f"{first.rstrip(':')} {release}"
    return {"launcher": launcher, "version": first, "flavour": flavour, "release": release}


# Which MPI a version text names: model.mpi (MPI_RELEASES, mpi_identity).
# How much of two releases must agree for a library to run under a launcher: Open MPI's runtime
# (ORTE in 4.x, PRRTE in 5.x) and its library change together by minor release; MPICH's Hydra
# speaks PMI to every MPICH of its major release.
SAME_RELEASE_PARTS = {"openmpi": 2, "mpich": 1}


def same_mpi(launcher: tuple[str, str], library: tuple[str, str]) -> bool:
    if launcher[0] != library[0]:
        return False
    parts = SAME_RELEASE_PARTS.get(launcher[0], 2)
    return launcher[1].split(".")[:parts] == library[1].split(".")[:parts]


def ask_probe(python: str, env: Mapping[str, str], *words: str) -> dict[str, Any]:
    """The rank probe's one-line JSON answer to `words` (`--mpi-library`, `--library-version
    PATH`), run by `python` in the launch environment `env`, as a rank's Python would load it."""
    try:
        out = subprocess.run([python, PROBE_PATH, *words], capture_output=True, text=True, timeout=60, env=dict(env))
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as error:
        return {"mpi_library": None, "mpi_library_error": f"cannot ask {python}: {error}"}


def python_mpi_library(python: str, env: Mapping[str, str]) -> dict[str, Any]:
    """What a rank's Python (`python`, in the launch environment `env`) loads through mpi4py: the
    rank probe's own answer (`rank_probe.mpi_library`), asked once before the launch."""
    return ask_probe(python, env, "--mpi-library")


def library_mismatch(mpi: Mapping[str, Any], library: Mapping[str, Any], who: str = "the ranks' mpi4py") -> str | None:
    """One line naming both sides where the library `who` loads is not the launcher's MPI
    (`mpi`: launcher_version's answer; `library`: rank_probe.mpi_library's); None where they
    are one MPI, or where either side cannot be told (recorded, not refused)."""
    flavour, release = mpi.get("flavour"), mpi.get("release")
    launcher = (flavour, release) if flavour in SAME_RELEASE_PARTS and release else None
    if library.get("mpi_library") is None:
        error = library.get("mpi_library_error") or "no library"
        return f"{who} loads no MPI library ({error}); the launcher is {mpi.get('launcher')} ({mpi.get('version')})"
    loaded = mpi_identity(library["mpi_library"])
    if launcher is None or loaded is None or same_mpi(launcher, loaded):
        return None
    where = f" ({library['libmpi']})" if library.get("libmpi") else ""
    return (
        f"{who} loads {library['mpi_library'].split(',')[0]}{where} but the launcher is "
        f"{mpi.get('launcher')} ({mpi.get('version')}): a rank must run on its launcher's MPI; build mpi4py "
        "against the site's MPI (SCALESTUDY_MPI=site bash scripts/setup.sh, with its module loaded) or set the "
        "cluster file's mpi.source: python_env"
    )


def rank_libraries(ranks: list[dict[str, Any]]) -> dict[str, list[Any]] | None:
    """Each MPI library the ranks loaded -> the ranks that loaded it: what the rank's Python's
    mpi4py loads (the probe's `mpi_library`), else the library file the rank mapped, as that
    library names itself (`mapped_mpi_library`, name_mapped_libraries); None where no rank told."""
    found: dict[str, list[Any]] = {}
    for rank in ranks:
        said = rank.get("mpi_library") if "mpi_library" in rank else rank.get("mapped_mpi_library")
        if said is not None or "mpi_library" in rank:
            found.setdefault(str(said), []).append(rank.get("rank"))
    return found or None


def name_mapped_libraries(seen: dict[str, Any], hosts: list[dict], python: str, env: Mapping[str, str]) -> None:
    """Every rank's MPI library, whatever its app: the file each rank mapped (its host's watcher
    reads /proc/<pid>/maps: `ranks_libmpi`, by the rank's pid), named by the library itself
    (asked once per file with the launch's environment: rank_probe --library-version). Sets each
    rank's `libmpi` (where the probe had not) and `mapped_mpi_library`, and `seen`'s mpi_libraries."""
    mapped = {int(pid): path for line in hosts for pid, path in (line.get("ranks_libmpi") or {}).items()}
    names: dict[str, str | None] = {}
    for rank in seen["ranks"]:
        path = mapped.get(rank.get("pid"))
        if path is None:
            continue
        if path not in names:
            names[path] = ask_probe(python, env, "--library-version", path).get("mpi_library")
        rank.setdefault("libmpi", path)
        rank["mapped_mpi_library"] = names[path] or path
    seen["mpi_libraries"] = rank_libraries(seen["ranks"])


def rank_library_mismatch(mpi: Mapping[str, Any], ranks: list[dict[str, Any]]) -> str | None:
    """The first rank whose library is not the launcher's MPI, in library_mismatch's words."""
    for rank in ranks:
        if "mpi_library" in rank:
            said = library_mismatch(mpi, rank, f"rank {rank.get('rank')} on {rank.get('host')}")
            if said:
                return said
    return None


def name_and_version(distribution: metadata.Distribution) -> tuple[str | None, str | None]:
    """The Name and Version fields of a distribution's metadata, read from its header lines:
    what `distribution.metadata` gives, without parsing the whole file as an e-mail message
    (2-3 ms per distribution: most of a run job's own CPU time in a venv of 380)."""
    text = distribution.read_text("METADATA") or distribution.read_text("PKG-INFO") or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the body (the long description) starts after the first empty line
        key, colon, value = line.partition(":")
        if colon and key in ("Name", "Version"):
            fields.setdefault(key, value.strip())
    return fields.get("Name"), fields.get("Version")


@functools.cache
def installed() -> tuple[tuple[str, str | None], ...]:
    """(Name, Version) of every installed distribution, in the order of sys.path: one scan per
    run job, shared by the packages' digest and the versions every run records."""
    return tuple((name, version) for name, version in map(name_and_version, metadata.distributions()) if name)


def normalized(name: str) -> str:
    """A distribution's name as the packaging specs compare names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_versions(packages: Iterable[str]) -> dict[str, str | None]:
    """The version of each of `packages` that is installed (the first on sys.path, as
    importlib.metadata.version finds it), by the name asked for."""
    first: dict[str, str | None] = {}
    for name, version in installed():
        first.setdefault(normalized(name), version)
    return {package: first[normalized(package)] for package in packages if normalized(package) in first}


def packages_digest() -> dict[str, Any]:
    """sha256 of the sorted `name==version` list of installed distributions (what
    `pip freeze` lists), so two runs can be shown to share a software stack."""
    pins = sorted({f"{name.lower()}=={version}" for name, version in installed()})
    return {
        "python_packages_sha256": hashlib.sha256("\n".join(pins).encode()).hexdigest(),
        "python_packages": len(pins),
    }


def before_run(launcher: str, env: Mapping[str, str]) -> dict[str, Any]:
    return {"mpi": launcher_version(launcher, env), "modules": modules.loaded(env), **packages_digest()}


# ---------------------------------------------------------------- after the run


def registered_mca(run_dir: Path) -> dict[str, str] | None:
    """The MCA parameters Open MPI registered from the environment, or None without a record."""
    path = run_dir / MCA_PARAMS_FILE
    if not path.is_file():
        return None
    return {name: value for name, value, _source in MCA_LINE.findall(path.read_text(errors="replace"))}


def after_run(log_text: str, run_dir: Path) -> dict[str, Any]:
    ranks = rank_lines(log_text)
    versions = sorted(set(NCCL_VERSION.findall(log_text)))
    meeting = re.search(rf"^{RENDEZVOUS_PREFIX} (\S+)$", log_text, re.M)
    return {
        "ranks": ranks,
        "node_list": sorted({r["host"] for r in ranks}),
        # Where torch.distributed's ranks met (rank 0's init_method), for the apps that print it.
        "rendezvous": meeting.group(1) if meeting else None,
        "nccl_version": versions[0] if len(versions) == 1 else (versions or None),
        "mca_registered": registered_mca(run_dir),
    }


def same_value(wanted: str, seen: str | None) -> bool:
    if seen is None:
        return False
    a, b = str(wanted).strip().lower(), str(seen).strip().lower()
    return a == b or (a in TRUE and b in TRUE) or (a in FALSE and b in FALSE)


def settings_proof(
    point, ranks: list[dict[str, Any]], mca_registered: Mapping[str, str] | None, flavour: str | None
) -> dict[str, Any]:
    """Did every setting the point asked for reach every rank and take effect?"""
    problems = []
    if len(ranks) < point.ranks:
        problems.append(f"only {len(ranks)} of {point.ranks} ranks reported their settings")
    for name, value in point.nccl_env.items():
        for rank in ranks:
            if rank["env"].get(name) != value:
                problems.append(f"{name}={value}: rank {rank['rank']} on {rank['host']} saw {rank['env'].get(name)!r}")
    if flavour == "openmpi":
        for name, value in point.mpi_flags.items():
            for rank in ranks:
                if rank["env"].get(f"OMPI_MCA_{name}") != value:
                    problems.append(f"--mca {name} {value}: never reached rank {rank['rank']} on {rank['host']}")
            if mca_registered is None:
                problems.append(
                    f"--mca {name} {value}: Open MPI wrote no record of its parameters (MPI_Init not done?)"
                )
            elif name not in mca_registered:
                problems.append(f"--mca {name} {value}: no Open MPI component registered it; it had no effect")
            elif not same_value(value, mca_registered[name]):
                problems.append(f"--mca {name} {value}: Open MPI used {mca_registered[name]!r}")
    else:
        # MPICH and others: a flag set is environment variables; each rank must have seen them.
        for name, value in point.mpi_flags.items():
            for rank in ranks:
                if rank["env"].get(name) != value:
                    problems.append(
                        f"{name}={value}: rank {rank['rank']} on {rank['host']} saw {rank['env'].get(name)!r}"
                    )
    problems += binding_problems(point, ranks)
    return {
        "verified": not problems,
        "problems": problems,
        "ranks_reported": len(ranks),
        "bindings": bindings_text(ranks),
        "mca_source": "mpi_show_mca_params" if flavour == "openmpi" and mca_registered is not None else None,
        "hosts": proof_per_host(point, ranks, problems, flavour),
    }


def proof_per_host(point, ranks: list[dict[str, Any]], problems: list[str], flavour: str | None) -> dict[str, Any]:
    """The proof host by host: its ranks, the settings each of them saw (the variables of the
    flag set and the NCCL set, and the binding), and whether no problem names one of its ranks.
    Open MPI's record of the parameters it registered is rank 0's (its host's); on every other
    host a flag set is proven by the OMPI_MCA_ variables each rank saw."""
    names = [*point.nccl_env, *(f"OMPI_MCA_{name}" if flavour == "openmpi" else name for name in point.mpi_flags)]
    if point.binding != DEFAULT_PLACEMENT:
        names.append(f"binding {point.binding}")
    found: dict[str, Any] = {}
    for rank in ranks:
        host = found.setdefault(str(rank.get("host")), {"ranks": [], "settings": names, "verified": True})
        host["ranks"].append(rank.get("rank"))
        where = f"rank {rank.get('rank')} on {rank.get('host')}"
        if any(f"{where} " in f"{problem} " for problem in problems):
            host["verified"] = False
    return found


# How many of each object a rank bound to `binding` may span (per thread of the rank for
# core and hwthread), and the probe's count of it.
BINDING_SPAN = {"hwthread": "cpus", "core": "cores", "socket": "sockets", "numa": "numa"}


def binding_problems(point, ranks: list[dict[str, Any]]) -> list[str]:
    """Did each rank get the binding the point asked for? The rank probe's affinity against its
    launcher's (which no binding restricts): `none` must leave a rank all of it; `core` must
    confine a rank to threads_per_rank cores (hwthread: CPUs; socket, numa: one). A binding
    the launcher ignored (a rank free on every CPU) is a problem, like an MCA flag without effect.
    The default placement (the launcher's own choice) is recorded, not judged."""
    binding = point.binding
    if binding == DEFAULT_PLACEMENT:
        return []
    problems = []
    for rank in ranks:
        where = f"rank {rank.get('rank')} on {rank.get('host')}"
        cpus, launcher = rank.get("cpus"), rank.get("launcher_cpus")
        if cpus is None:
            problems.append(f"binding {binding}: {where} reported no CPU affinity")
            continue
        if binding == "none":
            if launcher is not None and cpus != launcher:
                problems.append(f"binding none: {where} was bound to CPUs {cpus} of the launcher's {launcher}")
            continue
        span = BINDING_SPAN[binding]
        most = point.threads_per_rank if span in ("cpus", "cores") else 1
        seen = len(parse_cpu_list(cpus)) if span == "cpus" else rank.get(span)
        if seen is None:
            problems.append(f"binding {binding}: {where} may run on CPUs {cpus}, but their {span} are unknown")
        elif seen > most:
            problems.append(
                f"binding {binding}: {where} may run on CPUs {cpus} ({seen} {span}, at most {most} when bound); "
                "the launcher did not bind it"
            )
    return problems


def bindings_text(ranks: list[dict[str, Any]]) -> str:
    """Where each rank may run, one 'rank@host:CPUs' each, e.g. '0@n1:0 1@n1:1'."""
    return " ".join(f"{r.get('rank')}@{r.get('host')}:{r.get('cpus', '?')}" for r in ranks)
