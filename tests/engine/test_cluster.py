"""Grading on a cluster: `python -m autograder slurm` against a real single-node Slurm, and the
Kubernetes manifests (checked for their syntax and fields only: never run on a cluster here)."""

import re
import secrets
import subprocess
import sys

import pytest
import yaml

from autograder.engine import course, slurm
from tests.support import COURSE
from autograder.samples.submissions import SLUG, write_batch
from tests.engine.grading import details, grades, run_grader
from tests.engine.slurm_cluster import single_node_slurm

CLUSTER = course.ENGINE / "cluster"


def test_slurm_grades_a_batch_in_shards_as_one_grade_does(tmp_path):
    """21 students as 3 shards and a merge job (--wait) give what one `grade` gives."""
    submissions, out, plain = tmp_path / "submissions", tmp_path / "out", tmp_path / "plain"
    write_batch(submissions, 21, [SLUG])
    secret = tmp_path / "secret.key"
    secret.write_text(secrets.token_hex(32) + "\n")
    broken_secret = tmp_path / "broken.key"
    broken_secret.write_text("not a key\n")  # every shard fails on it: the merge never runs

    def run_slurm(out, secret):
        return subprocess.run([sys.executable, "-m", "autograder", "slurm", submissions, "--out", out,
                               "--shards", "3", "--wait", "--secret", secret, "--memory", "1024"],
                              cwd=COURSE.root, env=env, capture_output=True, text=True, timeout=1200)

    with single_node_slurm(tmp_path / "slurm") as env:
        daemons_env = env
        failed = run_slurm(tmp_path / "failed", broken_secret)
        result = run_slurm(out, secret)
    assert failed.returncode != 0 and "merge job ended CANCELLED" in failed.stderr, failed.stderr
    assert not (tmp_path / "failed" / "grades.csv").exists()
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((out / "slurm").glob("*.out")))
    assert result.returncode == 0, result.stdout + result.stderr + logs
    array, merge = re.findall(r"job(?: array)?: (\d+)", result.stdout)
    assert int(merge) > int(array)
    for shard in (1, 2, 3):  # every task of the array graded its share
        assert list((out / "shards" / str(shard) / "results").glob("*/*.json")), logs
    graded = run_grader("grade", submissions, "--out", plain, "--secret", secret, "--memory", "1024")
    assert graded.returncode == 0, graded.stderr
    assert len(grades(out)) == 21
    assert grades(out) == grades(plain)
    assert details(out) == details(plain)
    assert "SLURM_CONF" in daemons_env  # the daemons were ours, and single_node_slurm stopped them
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "slurm")], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", f"daemons still running: {leftover.stdout}"


def test_slurm_job_scripts_grade_shard_i_of_n_and_merge_all(tmp_path):
    grade_script, merge_script = slurm.scripts(COURSE, tmp_path / "in", tmp_path / "out", 5, ["--memory", "512"])
    assert "--shard $SLURM_ARRAY_TASK_ID/5" in grade_script
    assert f"--out {tmp_path / 'out' / 'shards'}/$SLURM_ARRAY_TASK_ID" in grade_script
    assert "--memory 512 --workers ${SLURM_CPUS_PER_TASK:-1}" in grade_script
    assert merge_script.count(str(tmp_path / "out" / "shards")) == 5
    assert f"--out {tmp_path / 'out'}\n" in merge_script
    grade_script, _ = slurm.scripts(COURSE, tmp_path / "in", tmp_path / "out", 2, ["--workers", "3"])
    assert "SLURM_CPUS_PER_TASK" not in grade_script  # the instructor's --workers wins


@pytest.mark.parametrize("options, message", [
    (["--shard", "1/2"], "set by the slurm command"),
    (["--memory", "lots"], "invalid int value"),
    (["--no-such-option"], "unrecognized arguments"),
])
def test_slurm_refuses_bad_grade_options_before_submitting(tmp_path, options, message):
    (tmp_path / "in").mkdir()
    result = run_grader("slurm", tmp_path / "in", "--out", tmp_path / "out", "--shards", 2, *options)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


def test_other_commands_refuse_unknown_options(tmp_path):
    result = run_grader("merge", tmp_path, "--out", tmp_path / "out", "--shards", 2)
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr


def _manifest(name):
    documents = list(yaml.safe_load_all((CLUSTER / name).read_text()))
    assert len(documents) == 1
    return documents[0]


def _command(job):
    container, = job["spec"]["template"]["spec"]["containers"]
    return " ".join(container["command"] + container["args"])


def test_kubernetes_indexed_job_grades_shard_index_plus_one_of_n():
    job = _manifest("grade-shards.yaml")
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    shards = spec["completions"]
    assert spec["parallelism"] == shards > 1
    command = _command(job)
    assert command.startswith("sh -c exec .venv/bin/python -m autograder.engine grade /data/submissions")
    assert f"--shard $((JOB_COMPLETION_INDEX + 1))/{shards}" in command
    assert "--out /data/out/shards/$((JOB_COMPLETION_INDEX + 1))" in command
    assert "--secret /data/out/secret.key" in command  # every shard draws from one secret
    security = job["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert "SYS_ADMIN" in security["capabilities"]["add"]  # bubblewrap, as root, makes namespaces
    merge = _manifest("grade-merge.yaml")
    assert merge["kind"] == "Job" and "completionMode" not in merge["spec"]
    folders = re.findall(r"/data/out/shards/(\d+)", _command(merge))
    assert folders == [str(i) for i in range(1, shards + 1)]
    assert _command(merge).endswith("--out /data/out")
