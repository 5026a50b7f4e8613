"""A site's own record of a job's resource use (Gadi's "Resource Usage" block), read
without any scheduler backend."""

from scalestudy.analysis.accounting import parse_resource_usage, site_resources
from scalestudy.model.paths import BATCH_LOG


def test_gadi_resource_usage_block(data_dir):
    usage = parse_resource_usage((data_dir / "pbs" / "gadi-resource-usage-576cpu.log").read_text())
    assert usage["service_units"] == 12.80
    assert usage["memory_used_gb"] == 201.4877  # "Memory Used: 187.65GB": PBS's GB is 2^30 bytes
    assert usage["walltime_used_s"] == 40
    assert usage["exit_status"] == 0
    assert (usage["ncpus_requested"], usage["ncpus_used"]) == (576, 576)
    assert usage["cpu_time_used_s"] == 5 * 3600 + 51 * 60 + 22
    assert usage["walltime_requested_s"] == 600
    assert usage["job_id"] == "117204935.gadi-pbs"
    assert usage["jobfs_used_gb"] == 0


def test_site_resources_read_the_batch_log(tmp_path, data_dir):
    (tmp_path / BATCH_LOG).write_text((data_dir / "pbs" / "gadi-resource-usage-576cpu.log").read_text())
    found = site_resources(tmp_path)
    assert found["service_units"] == 12.8 and found["service_units_source"] == "site"
    assert found["memory_used_gb"] == 201.4877 and found["batch_walltime_used_s"] == 40
    assert site_resources(tmp_path / "nothing") == {}
