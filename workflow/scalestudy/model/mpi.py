"""Which MPI a version text names, and the MPI a run used as one short text.

An MPI names itself in its launcher's `--version` ("mpirun (Open MPI) 4.1.4", Hydra's "Version:
4.0.2") and in its library's MPI_Get_library_version ("Open MPI v4.1.4, ...", "MPICH Version:
4.0.2"). `launch.provenance` reads a launcher and a rank's library with it before and after a
run; the analysis reads a record's (`run_mpi`): the repeats of one point measured on two MPIs are
two results, never one mean. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MPI_RELEASES = (
    ("openmpi", re.compile(r"(?:\((?:Open MPI|OpenRTE)\)|Open MPI v)\s*(\d+\.\d+[.\w]*)")),
    ("mpich", re.compile(r"(?:MPICH Version:|HYDRA build details:\s+Version:)\s*(\d+\.\d+[.\w]*)")),
)


def mpi_identity(text: str | None) -> tuple[str, str] | None:
    """(flavour, release) an MPI's version text names, None where it names none known."""
    for flavour, pattern in MPI_RELEASES:
        found = pattern.search(text or "")
        if found:
            return flavour, found.group(1)
    return None


def run_mpi(provenance: Mapping) -> str:
    """The MPI a run used, as '<flavour> <release>' (and ' under <modules>' where the job had
    modules loaded), e.g. 'openmpi 4.1.4 under openmpi/4.1.4': the libraries its ranks named
    (`mpi_libraries`), else its launcher's `--version` (`mpi.version`; records written before the
    ranks named their library have only that). '' where the record tells neither."""
    libraries = provenance.get("mpi_libraries")
    said = list(libraries) if isinstance(libraries, Mapping) and libraries else []
    if not said:
        launcher = provenance.get("mpi")
        said = [launcher.get("version")] if isinstance(launcher, Mapping) else []
    names = []
    for text in said:
        identity = mpi_identity(str(text) if text is not None else None)
        name = " ".join(identity) if identity else (str(text).split(",")[0] if text else "")
        if name and name not in names:
            names.append(name)
    if not names:
        return ""
    modules = provenance.get("modules")
    under = " ".join(map(str, modules)) if isinstance(modules, list) else ""
    return " + ".join(names) + (f" under {under}" if under else "")
