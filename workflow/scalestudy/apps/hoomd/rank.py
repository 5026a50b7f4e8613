"""The HOOMD-blue WCA fluid benchmark, as scalestudy runs it (HOOMD-blue v4/v5 Python API).

Equivalent to hoomd-benchmarks' md_pair_wca: N particles at number density 1.0, LJ with
epsilon = sigma = 1 cut at 2^(1/6) with no shift, dt 0.005, a cell neighbour list with
buffer 0.4 checked every step, ConstantVolume with the MTTK thermostat (kT 1.2, tau 0.5);
`run(0)`, `run(warmup_steps)`, then `repeat` x `run(benchmark_steps)`, each reporting
`sim.tps`, and their mean. The output has the reference harness's verbose shape, so one
parser reads both.

Three commands:

    python -m scalestudy.apps.hoomd.rank initial-state --N 4000 --rho 1.0 --dimensions 3 --output X.gsd
    python -m scalestudy.apps.hoomd.rank benchmark --initial-state X.gsd --device CPU --warmup_steps ... \
        --benchmark_steps ... --repeat ...
    python -m scalestudy.apps.hoomd.rank reference --initial-state X.gsd --run-dir DIR -- <md_pair_wca options>

`initial-state` makes the randomized hard-sphere fluid compressed to the target density
(hard-sphere Monte Carlo, as the reference does), once, outside every timed job.
`reference` runs hoomd-benchmarks' own md_pair_wca module (params.harness: hoomd_benchmarks)
on that same cached state, from the run directory.

The app (app.py beside it) builds these command lines and parses what they print; this program
imports nothing of scalestudy (pyproject.toml's rank-program contract holds every rank program to
no planner; this one imports not even the model layer), so a rank loads no planner:
started as `python -m scalestudy.apps.hoomd.rank`, Python first imports the packages around it
(scalestudy, scalestudy.apps, scalestudy.apps.hoomd), and each of those is a docstring only
(tests/integration/test_rank_programs.py).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import runpy
import statistics
import sys
from pathlib import Path

LJ_WCA_CUT = 2 ** (1 / 6)


def make_device(name: str, verbose: bool = True):
    import hoomd

    device = hoomd.device.GPU() if name == "GPU" else hoomd.device.CPU()
    if not verbose:
        device.notice_level = 0
    return device


def initial_state(particles: int, rho: float, dimensions: int, output: Path, device_name: str = "CPU") -> None:
    """Particles on a loose grid, randomized by hard-sphere Monte Carlo (diameter 1), then
    compressed to N/rho volume; written to `output` in one rename, so a reader never sees
    half a file."""
    import hoomd
    import numpy

    device = make_device(device_name)
    rank0 = device.communicator.rank == 0
    spacing = 1.5
    per_side = math.ceil(particles ** (1 / dimensions))
    side = per_side * spacing
    snapshot = hoomd.Snapshot(communicator=device.communicator)
    snapshot.configuration.box = [side, side, side if dimensions == 3 else 0, 0, 0, 0]
    if rank0:
        snapshot.particles.types = ["A"]
        snapshot.particles.N = particles
        axis = numpy.linspace(-side / 2, side / 2, per_side, endpoint=False)
        grid = list(itertools.islice(itertools.product(axis, repeat=dimensions), particles))
        snapshot.particles.position[:, 0:dimensions] = grid

    mc = hoomd.hpmc.integrate.Sphere()
    mc.shape["A"] = dict(diameter=1.0)
    sim = hoomd.Simulation(device=device, seed=10)
    sim.create_state_from_snapshot(snapshot)
    sim.operations.integrator = mc
    sim.run(1000)  # randomize

    target = hoomd.Box.from_box(sim.state.box)
    target.volume = particles / rho
    every_10 = hoomd.trigger.Periodic(10)
    compress = hoomd.hpmc.update.QuickCompress(trigger=every_10, target_box=target)
    sim.operations.updaters.append(compress)
    sim.operations.tuners.append(
        hoomd.hpmc.tune.MoveSize.scale_solver(moves=["d"], target=0.2, trigger=every_10, max_translation_move=0.2)
    )
    while not compress.complete and sim.timestep < 100_000:
        sim.run(100)
    if not compress.complete:
        raise SystemExit(f"scalestudy: compression to density {rho} did not complete in 100000 steps")

    output = Path(output)
    partial = output.with_name(f".{output.name}.partial")
    if rank0 and partial.exists():
        partial.unlink()
    hoomd.write.GSD.write(state=sim.state, mode="xb", filename=str(partial))
    if rank0:
        os.replace(partial, output)
        print(f"scalestudy: initial state {output}: N={particles}, density={rho}, {sim.timestep} MC steps")


def benchmark(
    initial: Path, device_name: str, warmup_steps: int, benchmark_steps: int, repeat: int
) -> list[float] | None:
    """Run the benchmark on the cached state; rank 0 prints and returns steps/s per timed run."""
    import hoomd

    device = make_device(device_name)
    rank0 = device.communicator.rank == 0
    sim = hoomd.Simulation(device=device)
    sim.create_state_from_gsd(filename=str(initial))

    cell = hoomd.md.nlist.Cell(buffer=0.4)
    cell.rebuild_check_delay = 1
    pair = hoomd.md.pair.LJ(nlist=cell)
    types = sim.state.particle_types
    pair.params[(types, types)] = dict(epsilon=1, sigma=1)
    pair.r_cut[(types, types)] = LJ_WCA_CUT
    pair.mode = "none"
    integrator = hoomd.md.Integrator(dt=0.005)
    integrator.forces.append(pair)
    integrator.methods.append(
        hoomd.md.methods.ConstantVolume(
            filter=hoomd.filter.All(), thermostat=hoomd.md.methods.thermostats.MTTK(kT=1.2, tau=0.5)
        )
    )
    sim.operations.integrator = integrator

    def say(text: str) -> None:
        if rank0:
            print(text, flush=True)

    sim.run(0)  # attach every operation before timing
    say(f"scalestudy: {sim.state.N_particles} particles from {initial}")
    say("Running MDPairWCA benchmark")
    say(f".. warming up for {warmup_steps} steps")
    sim.run(warmup_steps)
    if device_name == "GPU":
        while not sim.operations.is_tuning_complete:
            say(f".. autotuning GPU kernel parameters for {warmup_steps} steps")
            sim.run(warmup_steps)
    say(f".. running for {benchmark_steps} steps {repeat} time(s)")
    performance = []
    for _ in range(repeat):
        sim.run(benchmark_steps)
        performance.append(sim.tps)
        say(f".. {performance[-1]} time steps per second")
    say(f"{statistics.fmean(performance)}")
    return performance if rank0 else None


def reference(initial: Path, run_dir: Path, harness_args: list[str]) -> None:
    """hoomd-benchmarks' md_pair_wca from the run directory, finding the cached state where it
    looks for it (initial_configuration_cache/ in its working directory)."""
    cache = run_dir / "initial_configuration_cache"
    cache.mkdir(parents=True, exist_ok=True)
    link = cache / initial.name
    try:
        link.symlink_to(initial.resolve())
    except FileExistsError:  # every rank tries; one wins
        pass
    os.chdir(run_dir)
    sys.argv = ["md_pair_wca", *harness_args]
    runpy.run_module("hoomd_benchmarks.md_pair_wca", run_name="__main__", alter_sys=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalestudy.apps.hoomd.rank")
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("initial-state", help="make the compressed hard-sphere fluid (GSD)")
    make.add_argument("--N", type=int, required=True)
    make.add_argument("--rho", type=float, default=1.0)
    make.add_argument("--dimensions", type=int, choices=(2, 3), default=3)
    make.add_argument("--device", choices=("CPU", "GPU"), default="CPU")
    make.add_argument("--output", type=Path, required=True)
    run = commands.add_parser("benchmark", help="run the WCA benchmark on a cached initial state")
    run.add_argument("--initial-state", type=Path, required=True)
    run.add_argument("--device", choices=("CPU", "GPU"), required=True)
    run.add_argument("--warmup_steps", type=int, required=True)
    run.add_argument("--benchmark_steps", type=int, required=True)
    run.add_argument("--repeat", type=int, default=1)
    ref = commands.add_parser("reference", help="run hoomd_benchmarks.md_pair_wca on a cached initial state")
    ref.add_argument("--initial-state", type=Path, required=True)
    ref.add_argument("--run-dir", type=Path, required=True)
    ref.add_argument("harness_args", nargs=argparse.REMAINDER, help="after --: md_pair_wca's own options")
    args = parser.parse_args(argv)
    if args.command == "initial-state":
        initial_state(args.N, args.rho, args.dimensions, args.output, args.device)
    elif args.command == "benchmark":
        benchmark(args.initial_state, args.device, args.warmup_steps, args.benchmark_steps, args.repeat)
    else:
        reference(args.initial_state, args.run_dir, [a for a in args.harness_args if a != "--"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
