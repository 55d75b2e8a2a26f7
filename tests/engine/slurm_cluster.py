"""A single-node Slurm of its own, for the end-to-end test of `python -m autograder slurm`.

Everything lives in one temporary folder: the munge key and socket, the
slurm.conf (this machine's cores and memory, ProctrackType=proctrack/linuxproc,
TaskPlugin=task/none, free ports), the daemons' state, spool, pid and log
files. munged, slurmctld and slurmd run in the foreground as children of the
test, which stops exactly those processes, by their ids. Slurm's client
commands find this cluster through SLURM_CONF, in the environment returned.
Starting the daemons needs root (Slurm's daemons run as SlurmUser=root here).
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


class SlurmUnavailable(RuntimeError):
    """The cluster could not start: the message says why (and quotes the daemons' logs)."""


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _memory_mb():
    with open("/proc/meminfo") as meminfo:
        total_kb = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1])
    return total_kb // 1024 * 9 // 10  # slurmd refuses a node that declares more than it has


def slurm_conf(folder, host, munge_socket):
    return "\n".join([
        "ClusterName=grading-test",
        f"SlurmctldHost={host}(127.0.0.1)",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={munge_socket}",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
        f"StateSaveLocation={folder / 'state'}", f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}", f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}", f"SlurmdLogFile={folder / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
        "ReturnToService=2", "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none", "MinJobAge=600",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={_memory_mb()} State=UNKNOWN",
        f"PartitionName=grading Nodes={host} Default=YES MaxTime=INFINITE State=UP",
    ]) + "\n"


@contextlib.contextmanager
def single_node_slurm(folder):
    """Start munged, slurmctld and slurmd in `folder`; yield the environment that reaches them."""
    folder = Path(folder)
    missing = [d for d in ("munged", "slurmctld", "slurmd", "sbatch") if shutil.which(d) is None]
    if missing:
        raise SlurmUnavailable(f"not installed: {', '.join(missing)} (Debian packages slurm-wlm and "
                               "munge; `make` installs them)")
    if os.geteuid() != 0:
        raise SlurmUnavailable("the test starts Slurm's daemons, which needs root")
    for name in ("munge", "state", "spool"):
        (folder / name).mkdir(mode=0o700, parents=True, exist_ok=True)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    munge_socket = folder / "munge" / "munge.socket"
    host = socket.gethostname()
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, host, munge_socket))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons = []

    def start(command, log):
        daemons.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        env=env, start_new_session=True))

    with open(folder / "daemons.out", "wb") as log:
        try:
            start(["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={munge_socket}",
                   f"--pid-file={folder / 'munge' / 'munged.pid'}", f"--log-file={folder / 'munge.log'}",
                   f"--seed-file={folder / 'munge' / 'munged.seed'}"], log)
            _wait_for(lambda: munge_socket.exists(), daemons, folder, "munged did not open its socket")
            start(["slurmctld", "-D", "-i", "-f", str(conf)], log)
            start(["slurmd", "-D", "-N", host, "-f", str(conf)], log)
            _wait_for(lambda: _node_ready(env, host), daemons, folder,
                      "the node did not become idle")
            yield env
        finally:
            stop(daemons)


def _node_ready(env, host):
    state = subprocess.run(["sinfo", "--noheader", "--nodes", host, "--format=%T"], env=env,
                           capture_output=True, text=True)
    return state.returncode == 0 and state.stdout.strip().rstrip("*") in ("idle", "mixed", "allocated")


def _wait_for(ready, daemons, folder, what, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        dead = [p for p in daemons if p.poll() is not None]
        if dead:
            break
        if ready():
            return
        time.sleep(0.5)
    logs = "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
                     for path in sorted(folder.glob("*.log")) + [folder / "daemons.out"] if path.exists())
    raise SlurmUnavailable(f"{what} within {seconds} s; daemons that exited: "
                           f"{[p.args[0] for p in daemons if p.poll() is not None]}\n{logs}")


def stop(daemons):
    """Stop these processes (and only these), newest first: SIGTERM, then SIGKILL after 20 s."""
    for process in reversed(daemons):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
