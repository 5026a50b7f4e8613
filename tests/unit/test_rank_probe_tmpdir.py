"""A rank's TMPDIR is its node's (model.rank_probe.node_tmpdir), whatever the launcher passed on."""

from scalestudy.model.rank_probe import LAUNCH_TMPDIR_PREFIX, node_tmpdir


def test_the_daemons_tmpdir_wins_over_the_one_a_launcher_passed_on(tmp_path):
    node, first = tmp_path / "node", tmp_path / "first"
    node.mkdir(), first.mkdir()
    # Hydra passed the first node's TMPDIR; the proxy on this node was started by its sshd.
    assert node_tmpdir({"TMPDIR": str(first)}, {"TMPDIR": str(node)}) == str(node)


def test_the_launchers_own_folder_is_kept_on_its_node_and_elsewhere_gives_way_to_the_job_tmpdir(tmp_path):
    launch = tmp_path / f"{LAUNCH_TMPDIR_PREFIX}abc"
    launch.mkdir()
    # On the first node (the launcher is the daemon): removed with the launch, and all in it.
    assert node_tmpdir({"TMPDIR": str(launch)}, {"TMPDIR": str(launch)}) == str(launch)
    # Where srun passed the launcher's environment on to Open MPI's daemon on another node,
    # whose /tmp is its own: the folder is not there, the job's TMPDIR is.
    assert node_tmpdir({}, {"TMPDIR": str(tmp_path / f"{LAUNCH_TMPDIR_PREFIX}gone/")}) == str(tmp_path)


def test_no_folder_here_leaves_tmpdir_alone(tmp_path):
    assert node_tmpdir({"TMPDIR": str(tmp_path / "missing")}, None) is None
    assert node_tmpdir({}, {}) is None
    assert node_tmpdir({"TMPDIR": str(tmp_path)}, None) == str(tmp_path)
