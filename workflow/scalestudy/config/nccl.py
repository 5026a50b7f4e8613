"""Values of NCCL variables checked before anything runs.

NCCL reads its variables when a communicator starts. A value it cannot read is not an
error there: NCCL warns (only with NCCL_DEBUG=WARN or more) and uses its default, so
the setting silently does not take effect and the point measures something else.
The variables below have a closed set of values (NCCL documentation, "Environment
Variables"); any other NCCL_* variable (interface names, HCA lists, ...) is passed on
as given, and its arrival at every rank is checked afterwards (provenance.settings_proof).
"""

from __future__ import annotations

import re

FLAG = ("0", "1")
INTEGER = re.compile(r"^-?[0-9]+$")
TOPOLOGY_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
ALGORITHMS = ("ring", "tree", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")

CHOICES = {
    "NCCL_IB_DISABLE": FLAG,
    "NCCL_P2P_DISABLE": FLAG,
    "NCCL_SHM_DISABLE": FLAG,
    "NCCL_NET_GDR_READ": FLAG,
    "NCCL_CUMEM_ENABLE": FLAG,
    "NCCL_NVLS_ENABLE": FLAG,
    "NCCL_COLLNET_ENABLE": FLAG,
    "NCCL_IGNORE_CPU_AFFINITY": FLAG,
    "NCCL_CROSS_NIC": ("0", "1", "2"),
    "NCCL_DEBUG": ("VERSION", "WARN", "INFO", "TRACE"),
    "NCCL_LAUNCH_MODE": ("PARALLEL", "GROUP"),
}
INTEGERS = (
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_SL",
    "NCCL_IB_TC",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_BUFFSIZE",
    "NCCL_NTHREADS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_CTAS",
)
# An integer distance or a topology level name.
LEVELS = ("NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL")
# Comma lists of names, optionally excluded with a leading ^.
LISTS = {"NCCL_ALGO": ALGORITHMS, "NCCL_PROTO": PROTOCOLS}


def value_problem(name: str, value: object) -> str | None:
    """Why NCCL could not use `value` for `name`, or None (also for variables not listed)."""
    text = str(value)
    if name in CHOICES:
        allowed = CHOICES[name]
        if text.upper() not in allowed:
            return f"{text!r} is not allowed; allowed: {', '.join(allowed)} (NCCL would ignore it)"
    elif name in INTEGERS:
        if not INTEGER.fullmatch(text):
            return f"{text!r} is not an integer (NCCL would ignore it)"
    elif name in LEVELS:
        if not INTEGER.fullmatch(text) and text.upper() not in TOPOLOGY_LEVELS:
            return (
                f"{text!r} is not allowed; allowed: an integer or {', '.join(TOPOLOGY_LEVELS)} (NCCL would ignore it)"
            )
    elif name in LISTS and ":" not in text:  # per-collective syntax (allreduce:tree;...) is passed on
        names = [item.strip().lower() for item in text.removeprefix("^").split(",")]
        unknown = [item for item in names if item not in LISTS[name]]
        if unknown:
            allowed = ", ".join(LISTS[name])
            return f"{text!r} names unknown {', '.join(unknown)}; allowed: {allowed} (comma list, ^ excludes)"
    return None
