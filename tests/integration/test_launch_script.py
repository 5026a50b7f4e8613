"""launch.sh run by bash gives the launcher the same arguments (a real bash)."""

import json
import subprocess
import sys
import textwrap

from points import HOSTILE, point
from scalestudy.config.clusters import MpiLauncher
from scalestudy.launch.command import launch_script, mpirun_command


def test_launch_script_gives_bash_the_same_arguments(tmp_path):
    """Run launch.sh with real bash; a stand-in launcher records the argv it received."""
    recorder = tmp_path / "record-argv"
    recorder.write_text(
        textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        open({str(tmp_path / "argv.json")!r}, "w").write(json.dumps(sys.argv[1:]))
        """)
    )
    recorder.chmod(0o755)
    argv = mpirun_command(point(), ["python", HOSTILE], {}, MpiLauncher(launcher=str(recorder)))
    script = tmp_path / "launch.sh"
    script.write_text(launch_script(argv))
    subprocess.run(["bash", str(script)], check=True, cwd=tmp_path)
    assert json.loads((tmp_path / "argv.json").read_text()) == argv[1:]
    assert not (tmp_path / "pwned").exists()
