"""Process placement axes (hyperthreads, binding, mapping): launch lines per MPI flavour, the
Gadi request, the refusals at load, and that points which do not choose keep their names."""

import json

import pandas as pd
import pytest
from points import batch_point, md_config, pingpong_point
from scalestudy.analysis.records import aggregate
from scalestudy.analysis.scaling import scaling
from scalestudy.analysis.verdicts import variants
from scalestudy.config import clusters, study
from scalestudy.config.clusters import MpiLauncher
from scalestudy.config.requests import job_request, request_problems
from scalestudy.launch.command import mpirun_command
from scalestudy.launch.provenance import settings_proof
from scalestudy.model.errors import SweepError
from scalestudy.model.point import PLACEMENT_DEFAULTS
from scalestudy.model.rank_probe import cpu_list, parse_cpu_list, topology
from scalestudy.presentation import runs_section
from scalestudy.scheduler.pbs import dialects

OPEN_MPI = MpiLauncher()
HYDRA = MpiLauncher(flavour="mpich", launcher="mpiexec")


def line(p, mpi):
    return mpirun_command(p, ["app"], {}, mpi)


def problems_of(config):
    with pytest.raises(SweepError) as raised:
        study.load(config)
    return raised.value.problems


def pp_study(**keys):
    return {"cluster": "local", "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], **keys}}}


# ---------------------------------------------------------------- launch lines


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        ({}, ["--map-by", "ppr:2:node"]),
        ({"binding": "core"}, ["--map-by", "ppr:2:node", "--bind-to", "core"]),
        ({"binding": "none"}, ["--map-by", "ppr:2:node", "--bind-to", "none"]),
        ({"mapping": "spread", "binding": "socket"}, ["--map-by", "socket", "--bind-to", "socket"]),
        ({"mapping": "ppr:1:socket"}, ["--map-by", "ppr:1:socket"]),
        ({"hyperthreads": True, "binding": "hwthread"}, ["--map-by", "ppr:2:node", "--bind-to", "hwthread",
                                                         "--use-hwthread-cpus"]),
        ({"threads_per_rank": 4, "mapping": "numa", "binding": "core"}, ["--map-by", "numa:PE=4", "--bind-to", "core"]),
    ],
)  # fmt: skip
def test_open_mpi_launch_line_is_exact(placement, expected):
    assert line(pingpong_point(mpi_flags={}, nccl_env={}, **placement), OPEN_MPI) == [
        "mpirun", "-np", "2", *expected, "app"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        ({}, []),
        ({"binding": "core"}, ["-bind-to", "core"]),
        ({"binding": "none", "mapping": "spread"}, ["-bind-to", "none", "-map-by", "socket"]),
        ({"mapping": "ppr:2:node"}, []),  # Hydra's per-node count is -ppn, on every line
        ({"threads_per_rank": 4}, ["-bind-to", "core:4"]),
        ({"threads_per_rank": 4, "binding": "hwthread", "mapping": "core"}, ["-bind-to", "hwthread:4", "-map-by",
                                                                              "core"]),
        ({"hyperthreads": True, "binding": "socket"}, ["-bind-to", "socket"]),
    ],
)  # fmt: skip
def test_hydra_launch_line_is_exact(placement, expected):
    # A 1-node point's proxy is forked: no srun of Hydra's own inside a Slurm job step.
    assert line(pingpong_point(mpi_flags={}, nccl_env={}, **placement), HYDRA) == [
        "mpiexec", "-n", "2", "-ppn", "2", "-launcher", "fork", *expected, "app"
    ]  # fmt: skip


# ---------------------------------------------------------------- names and definitions


def test_points_at_the_default_placement_keep_their_id_and_json():
    p = pingpong_point()
    data = json.loads(p.to_json())
    assert not set(PLACEMENT_DEFAULTS) & set(data)
    assert p.id == "nodes1-rpn2/mpi-tcp/nccl-no-ib/rep1"
    assert p.variant == "mpi-tcp/nccl-no-ib"


def test_chosen_placement_names_one_segment_and_enters_the_definition():
    p = pingpong_point(hyperthreads=True, binding="core", mapping="ppr:1:socket")
    assert p.id == "nodes1-rpn2/mpi-tcp/nccl-no-ib/ht_bind-core_map-ppr-1-socket/rep1"
    assert p.variant == "mpi-tcp/nccl-no-ib/ht_bind-core_map-ppr-1-socket"
    data = json.loads(p.to_json())
    assert (data["hyperthreads"], data["binding"], data["mapping"]) == (True, "core", "ppr:1:socket")
    assert type(p).from_json(p.to_json(), 60) == p
    assert p.as_record()["binding"] == "core"


def test_a_study_listing_the_default_among_its_values_keeps_its_earlier_points():
    before = study.load(pp_study()).points
    after = study.load(pp_study(binding=["default", "core", "none"])).points
    assert [p.id for p in after[::3]] == [p.id for p in before]
    assert [p.to_json() for p in after[::3]] == [p.to_json() for p in before]
    assert [p.id.split("/")[-2] for p in after[:3]] == ["nccl-default", "bind-core", "bind-none"]


# ---------------------------------------------------------------- refusals at load


def test_a_binding_the_flavour_lacks_is_one_line_naming_the_key():
    config = md_config(N=4000)
    config["studies"]["md"]["binding"] = ["default", "cores"]
    assert problems_of(config) == [
        "studies.md.binding[1]: 'cores' is not a binding; did you mean 'core'? "
        "allowed for mpich: default, none, hwthread, core, socket, numa"
    ]


def test_a_per_socket_count_is_open_mpi_only():
    config = md_config(N=4000)
    config["studies"]["md"]["mapping"] = ["ppr:1:socket"]
    assert problems_of(config) == [
        "studies.md.mapping[0]: 'ppr:1:socket': MPICH Hydra has no per-socket rank count; allowed for mpich: "
        "default, core, socket, numa, hwthread, spread, ppr:N:node"
    ]
    assert study.load(pp_study(mapping=["ppr:1:socket"])).points[0].mapping == "ppr:1:socket"


def test_an_unknown_mapping_is_one_line():
    assert problems_of(pp_study(mapping=["scatter"])) == [
        "studies.pp.mapping[0]: 'scatter' is not a mapping; allowed for openmpi: default, core, socket, numa, "
        "hwthread, spread, ppr:N:node, ppr:N:socket, ppr:N:numa"
    ]


def test_ppr_per_node_must_place_the_points_ranks():
    assert problems_of(pp_study(mapping=["ppr:4:node"])) == [
        "studies.pp.mapping: 'ppr:4:node' places 4 ranks per node, but the point has ranks_per_node=2; "
        "use ppr:2:node or default"
    ]


def test_open_mpi_threads_bind_to_cores_only():
    assert problems_of(pp_study(threads_per_rank=2, binding=["none"])) == [
        "studies.pp.binding[0]: 'none' with threads_per_rank 2: Open MPI reserves cores per rank "
        "(--map-by ...:PE=N), which binds to them; allowed: default, core, hwthread"
    ]


def test_a_value_listed_twice_is_refused():
    assert problems_of(pp_study(binding=["core", "core"])) == [
        "studies.pp.binding: a value is listed twice: ['core', 'core']"
    ]


def test_hyperthreads_are_refused_where_the_cluster_file_has_no_smt(monkeypatch):
    monkeypatch.setattr(clusters, "detected_threads_per_core", lambda: 1)
    assert problems_of(pp_study(hyperthreads=[False, True])) == [
        "studies.pp.hyperthreads: true, but local has no hardware threads to use "
        "(config/clusters/local.yaml threads_per_core: 1); use [false]"
    ]
    aspire = clusters.load("aspire2a")
    assert request_problems(batch_point(1, hyperthreads=True), aspire) == [
        "studies.hoomd-wca.hyperthreads: true, but aspire2a has no hardware threads to use "
        "(config/clusters/aspire2a.yaml threads_per_core: 1); use [false]"
    ]


def test_the_local_machine_is_read_for_smt(tmp_path):
    siblings = tmp_path / "cpu{cpu}"
    for cpu in range(512):
        (tmp_path / f"cpu{cpu}").write_text("0,48\n")
    assert clusters.detected_threads_per_core(str(siblings)) == 2
    assert clusters.detected_threads_per_core(str(tmp_path / "nosuch{cpu}")) == 1


# ---------------------------------------------------------------- Gadi


def gadi_qsub(p):
    gadi = clusters.load("gadi")
    assert request_problems(p, gadi, dialects.site_rules(gadi)) == []
    return " ".join(dialects.dialect_of(gadi).qsub_command(job_request(p, gadi), project="ab12", log_path="LOG"))


def test_gadi_hyperthreads_ask_for_other_hyperthread_and_fit_96_ranks_per_node():
    assert gadi_qsub(batch_point(2, ranks_per_node=96, hyperthreads=True)) == (
        "qsub -P ab12 -q normal -l ncpus=96,mem=380GB,walltime=00:15:00,jobfs=10GB,"
        "storage=scratch/ab12+gdata/ab12,other=hyperthread -N hoomd-wca.n2r96.d.d.ht.r1 -j oe -o LOG"
    )
    assert "other=hyperthread" not in gadi_qsub(batch_point(2))


def test_gadi_refuses_more_than_two_ranks_per_core_and_96_without_hyperthreads():
    gadi = clusters.load("gadi")
    assert request_problems(batch_point(1, ranks_per_node=97, hyperthreads=True), gadi) == [
        "studies.hoomd-wca: 97 hardware threads per node (ranks_per_node x threads_per_rank) at nodes=1, "
        "ranks_per_node=97, but a normal job gets 48 of 48 cores x 2 threads (96 at most)"
    ]
    assert request_problems(batch_point(1, ranks_per_node=96), gadi) == [
        "studies.hoomd-wca: 96 cores per node (ranks_per_node x threads_per_rank) at nodes=1, ranks_per_node=96, "
        "but a normal job gets 48 of 48; hyperthreads: [true] fits up to 2 per core"
    ]


def test_a_pbs_dialect_without_a_hyperthread_resource_refuses_them():
    smt = clusters.from_mapping({"name": "x", "cores_per_node": 48, "mem_per_node_gib": 190, "threads_per_core": 2})
    p = batch_point(1, hyperthreads=True)
    assert request_problems(p, smt, dialects.site_rules(smt)) == [
        "studies.hoomd-wca.hyperthreads: true, but the PBS dialect 'select' of config/clusters/x.yaml has no way "
        "to ask for hardware threads; use [false]"
    ]


# ---------------------------------------------------------------- the binding each rank got


def bound(number, cpus, launcher="0-47", cores=1, sockets=1, numa=1, host="n1"):
    return {"rank": number, "host": host, "pid": 1, "env": {}, "cpus": cpus, "launcher_cpus": launcher,
            "cores": cores, "sockets": sockets, "numa": numa}  # fmt: skip


def test_a_binding_each_rank_got_is_proven_by_its_affinity():
    p = pingpong_point(mpi_flags={}, nccl_env={}, binding="core")
    proof = settings_proof(p, [bound(0, "0"), bound(1, "1")], None, "openmpi")
    assert proof["verified"] is True and proof["bindings"] == "0@n1:0 1@n1:1"
    hyperthreads = pingpong_point(mpi_flags={}, nccl_env={}, binding="core", hyperthreads=True)
    assert settings_proof(hyperthreads, [bound(0, "0,48"), bound(1, "1,49")], None, "openmpi")["verified"]


def test_a_binding_the_launcher_ignored_is_a_settings_proof_problem():
    p = pingpong_point(mpi_flags={}, nccl_env={}, binding="core")
    proof = settings_proof(p, [bound(0, "0"), bound(1, "0-47", cores=24, sockets=2)], None, "openmpi")
    assert proof["verified"] is False
    assert proof["problems"] == [
        "binding core: rank 1 on n1 may run on CPUs 0-47 (24 cores, at most 1 when bound); the launcher did not bind it"
    ]
    socket = pingpong_point(mpi_flags={}, nccl_env={}, binding="socket")
    assert (
        settings_proof(socket, [bound(0, "0-47", cores=24, sockets=2)] * 2, None, "openmpi")["problems"]
        == [
            "binding socket: rank 0 on n1 may run on CPUs 0-47 (2 sockets, at most 1 when bound); the launcher did not "
            "bind it"
        ]
        * 2
    )


def test_binding_none_must_leave_each_rank_the_launchers_cpus():
    p = pingpong_point(mpi_flags={}, nccl_env={}, binding="none")
    assert settings_proof(p, [bound(0, "0-47"), bound(1, "0-47")], None, "openmpi")["verified"] is True
    assert settings_proof(p, [bound(0, "0-47"), bound(1, "1")], None, "mpich")["problems"] == [
        "binding none: rank 1 on n1 was bound to CPUs 1 of the launcher's 0-47"
    ]


def test_the_default_placement_is_recorded_not_judged_and_old_rank_lines_say_nothing_of_cpus():
    p = pingpong_point(mpi_flags={}, nccl_env={})
    assert settings_proof(p, [bound(0, "0-47"), bound(1, "0")], None, "openmpi")["verified"] is True
    old = {"rank": 0, "host": "n1", "pid": 1, "env": {}}
    assert (
        settings_proof(pingpong_point(mpi_flags={}, nccl_env={}, binding="core"), [old, old], None, "openmpi")[
            "problems"
        ]
        == ["binding core: rank 0 on n1 reported no CPU affinity"] * 2
    )


def test_the_probe_writes_cpu_lists_the_kernels_way(tmp_path):
    assert cpu_list({8, 0, 1, 2, 3}) == "0-3,8" and parse_cpu_list("0-3,8") == {0, 1, 2, 3, 8}
    for cpu, (package, core, node) in enumerate([(0, 0, 0), (0, 0, 0), (1, 5, 1)]):
        folder = tmp_path / f"cpu{cpu}"
        (folder / "topology").mkdir(parents=True)
        (folder / "topology" / "physical_package_id").write_text(f"{package}\n")
        (folder / "topology" / "core_id").write_text(f"{core}\n")
        (folder / f"node{node}").mkdir()
    assert topology({0, 1}, str(tmp_path)) == {"cores": 1, "sockets": 1, "numa": 1}
    assert topology({0, 1, 2}, str(tmp_path)) == {"cores": 2, "sockets": 2, "numa": 2}
    assert topology({7}, str(tmp_path)) == {"cores": None, "sockets": None, "numa": None}


# ---------------------------------------------------------------- verdicts and the report


def placement_runs(default, core, none):
    rows = []
    for binding, values in (("default", default), ("core", core), ("none", none)):
        for repeat, value in enumerate(values, 1):
            rows.append(
                {"study": "s", "app": "lammps", "scaling": "strong", "mpi_flag_set": "default",
                 "nccl_env_set": "default", "hyperthreads": False, "binding": binding, "mapping": "default",
                 "variant": "mpi-default/nccl-default" + ("" if binding == "default" else f"/bind-{binding}"),
                 "nodes": 1, "ranks_per_node": 2, "gpus_per_node": 0, "ranks": 2, "repeat": repeat, "status": "ok",
                 "steps_per_s": value}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_placement_verdicts_are_against_the_default_placement_at_the_same_scale():
    table = variants(scaling(placement_runs([100.0, 101.0, 99.0], [120.0, 121.0, 119.0], [100.0, 104.0, 96.0])))
    rows = table[table["metric"] == "steps_per_s"].set_index("set")
    assert set(rows["axis"]) == {"binding"} and set(rows["baseline"]) == {"default"}
    assert rows.loc["core", "verdict"] == "faster" and rows.loc["core", "ratio"] == pytest.approx(1.2)
    assert rows.loc["none", "verdict"] == "no measurable difference"
    assert rows.loc["core", "baseline_variant"] == "mpi-default/nccl-default"
    assert (rows["n"] == 3).all() and (rows["n_baseline"] == 3).all()


def test_records_from_before_placement_ran_at_the_default_placement(tmp_path):
    old = tmp_path / "old.json"
    new = tmp_path / "new.json"
    record = {"status": "failed", "reason": "x", "figures": {}}
    old.write_text(json.dumps({**record, "point": {"study": "s", "app": "pingpong"}}))
    new.write_text(json.dumps({**record, "point": pingpong_point(binding="core").as_record()}))
    runs = aggregate([old, new])
    assert list(runs["binding"]) == ["default", "core"] and list(runs["hyperthreads"]) == [False, False]


def test_the_report_lists_unproven_settings_and_each_ranks_cpus():
    runs = pd.DataFrame(
        [
            {"point": "a/bind-core/rep1", "status": "ok", "binding": "core", "mapping": "default",
             "hyperthreads": False, "settings_verified": True, "settings_problems": "", "bindings": "0@n1:0 1@n1:1"},
            {"point": "a/bind-core/rep2", "status": "ok", "binding": "core", "mapping": "default",
             "hyperthreads": True, "settings_verified": False, "settings_problems": "binding core: rank 1 ...",
             "bindings": "0@n1:0 1@n1:0-47"},
        ]
    )  # fmt: skip
    heading, unproven, details = runs_section.proof_blocks(runs)
    assert heading.text.startswith("Settings not proven (1)")
    assert unproven.rows == [["a/bind-core/rep2", "binding core: rank 1 ..."]]
    # The flag set, the library the ranks named and the modules stand beside: '–' where not recorded.
    assert details.blocks[0].rows == [
        ["a/bind-core/rep1", "–", "–", "–", "binding core, mapping default", "yes", "0@n1:0 1@n1:1"],
        [
            "a/bind-core/rep2",
            "–",
            "–",
            "–",
            "binding core, mapping default, hardware threads",
            "no",
            "0@n1:0 1@n1:0-47",
        ],
    ]


def test_gadi_whole_nodes_count_hardware_threads():
    gadi = clusters.load("gadi")
    thin = batch_point(2, ranks_per_node=48, hyperthreads=True)  # 24 cores per node: PBS would give 1 node
    assert request_problems(thin, gadi, dialects.site_rules(gadi)) == [
        "studies.hoomd-wca: ncpus=48 at nodes=2, ranks_per_node=48 is 24 cores per node; Gadi normal jobs past one "
        "node take whole nodes (ranks_per_node x threads_per_rank = 48 cores, 96 with hyperthreads)"
    ]
    assert request_problems(batch_point(2, ranks_per_node=24), gadi, dialects.site_rules(gadi)) == [
        "studies.hoomd-wca: ncpus=48 at nodes=2, ranks_per_node=24 is 24 cores per node; Gadi normal jobs past one "
        "node take whole nodes (ranks_per_node x threads_per_rank = 48)"
    ]
