"""`python -m autograder slurm SUBMISSIONS --out OUT --shards N [--sbatch-option OPT ...] [--wait]`.

Grading on a Slurm cluster: a job array of N tasks, task i running
`grade --shard i/N` into OUT/shards/<i>, and a merge job that runs when all
of them have succeeded (`--dependency=afterok`) and combines the shards into
OUT. The result is that of one `grade` over the whole batch: the split is
stable (`grade.in_shard`) and every shard draws the checks' inputs from the
same secret (OUT/secret.key unless `--secret` is given).

The job scripts are written to OUT/slurm/ (what ran, for the record); the
jobs' output goes to OUT/slurm/*.out. OUT and SUBMISSIONS must be on a file
system that the compute nodes share, and the nodes need the course's
environment (this interpreter, bubblewrap) at the same paths.
"""

import shlex
import subprocess
import sys
from pathlib import Path

from .grade import _secret_key


class SlurmError(RuntimeError):
    """sbatch is missing or refused a job."""


def scripts(course, submissions, out, shards, grade_args):
    """(script of the shards, script of the merge) of `course` for the job array and the merge job."""
    python = shlex.quote(sys.executable)
    head = f"#!/bin/sh\n# Written by `python -m autograder.engine slurm`.\nset -e\ncd {shlex.quote(str(course.root))}\n"
    engine = f"{python} -m autograder.engine --course {shlex.quote(str(course.file))}"
    # One grading worker per CPU that Slurm gave the task, unless the instructor said otherwise.
    workers = [] if any(a.split("=")[0] == "--workers" for a in grade_args) else \
        ["--workers", "${SLURM_CPUS_PER_TASK:-1}"]
    grade = (f"exec {engine} grade {shlex.quote(str(submissions))} "
             f"--out {shlex.quote(str(out / 'shards'))}/$SLURM_ARRAY_TASK_ID "
             f"--shard $SLURM_ARRAY_TASK_ID/{shards} "
             + " ".join([*map(shlex.quote, grade_args), *workers]) + "\n")
    folders = " ".join(shlex.quote(str(out / "shards" / str(i))) for i in range(1, shards + 1))
    merge = f"exec {engine} merge {folders} --out {shlex.quote(str(out))}\n"
    return head + grade, head + merge


def submit(course, submissions, out, shards, grade_args=(), sbatch_options=(), wait=False, log=print):
    """Submit the job array and the merge job; return (array id, merge id, exit status of the
    merge job when `wait`, else None: not 0 when it failed or never ran)."""
    submissions, out = Path(submissions).resolve(), Path(out).resolve()
    grade_args = list(grade_args)
    if not any(a.split("=")[0] == "--secret" for a in grade_args):
        _secret_key(out / "secret.key")  # created once, here, and shared by every shard
        grade_args += ["--secret", str(out / "secret.key")]
    folder = out / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    grade_script, merge_script = scripts(course, submissions, out, shards, grade_args)
    (folder / "grade.sh").write_text(grade_script)
    (folder / "merge.sh").write_text(merge_script)
    common = ["--parsable", f"--chdir={course.root}", *sbatch_options]
    shards_job = _sbatch([*common, f"--array=1-{shards}", "--job-name=grade",
                          f"--output={folder / 'grade-%a.out'}", str(folder / "grade.sh")])
    array = _job_id(shards_job)
    shards_job.communicate()
    log(f"grading job array: {array} ({shards} shards, output in {folder})")
    merge_job = _sbatch([*common, f"--dependency=afterok:{array}", "--kill-on-invalid-dep=yes",
                         "--job-name=grade-merge", f"--output={folder / 'merge.out'}",
                         *(["--wait"] if wait else []), str(folder / "merge.sh")])
    merge = _job_id(merge_job)  # with --wait, sbatch prints the id, then waits for the job
    log(f"merge job: {merge} (runs when every shard has succeeded; output in {folder / 'merge.out'})")
    _, error = merge_job.communicate()
    if not wait:
        return array, merge, None
    if merge_job.returncode != 0 and error.strip():
        print(error.strip(), file=sys.stderr)
    status = merge_job.returncode
    state = _job_state(merge)
    if status == 0 and state and state[0] != "COMPLETED":
        # sbatch --wait exits 0 for a job cancelled before it ran (a shard failed: afterok)
        print(f"error: the merge job ended {state[0]} ({state[1]}): a shard failed? "
              f"See {folder}/grade-*.out", file=sys.stderr)
        status = 1
    return array, merge, status


def _sbatch(arguments):
    try:
        return subprocess.Popen(["sbatch", *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    except FileNotFoundError:
        raise SlurmError("sbatch is not installed here (Debian package slurm-client or slurm-wlm)")


def _job_id(process):
    """The job id that `sbatch --parsable` prints first ("id" or "id;cluster")."""
    line = process.stdout.readline()
    job = line.strip().split(";")[0]
    if not job.isdigit():
        _, error = process.communicate()
        raise SlurmError(f"sbatch refused the job: {(error or line).strip()}")
    return job


def _job_state(job):
    """(JobState, Reason) of `job` as the controller still knows it, or None."""
    shown = subprocess.run(["scontrol", "show", "job", "--oneliner", job], capture_output=True, text=True)
    fields = dict(item.split("=", 1) for item in shown.stdout.split() if "=" in item)
    return (fields["JobState"], fields.get("Reason", "")) if "JobState" in fields else None

