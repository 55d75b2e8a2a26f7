"""Grading as an ordinary user gives what grading as root gives (instructors grade as themselves).

Run as root (CI), this module runs the tests of AS_USER once more, in one pytest, as an ordinary
user (`as_user`: no account made, nothing of the host changed), and checks that every one of
them passed there: the same scores as under root, as those tests assert them. A few that grade
a batch (the hostile suites, nbgrader's course), shell commands, the memory rules, the
sandbox's walls. Run as an
ordinary user, every test runs as one already: it is skipped. To add a test, add its id.
"""

import os
import re
import subprocess
import sys

import pytest

from tests.engine import as_user
from tests.support import ROOT

AS_USER = [
    "tests/engine/test_sandbox_cells.py::test_the_sandbox_is_read_only_but_tmp_and_the_notebook_s_folder",
    "tests/engine/test_sandbox_cells.py::test_a_shell_command_runs_in_the_notebook_s_folders_as_its_user_without_network",
    "tests/engine/test_sandbox_cells.py::test_a_shell_command_is_stopped_with_its_cell_and_none_of_its_processes_outlives_it",
    "tests/engine/test_sandbox_cells.py::test_a_shell_command_has_few_processes_and_a_share_of_the_memory",
    "tests/engine/test_sandbox_cells.py::test_a_shell_command_enters_the_namespaces_of_the_sandbox_as_it_started",
    "tests/engine/test_sandbox_cells.py::test_bubblewrap_s_first_process_has_next_to_nothing_that_a_notebook_could_use",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_writes_nothing_in_the_sandbox_s_root",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_writes_nothing_in_dev",
    "tests/engine/test_sandbox_walls.py::test_an_ld_so_preload_the_notebook_plants_loads_into_no_process",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_s_environment_reaches_none_of_the_grader_s_tools",
    "tests/engine/test_sandbox_walls.py::test_namespaces_the_notebook_makes_for_itself_divert_no_tool_of_the_grader",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_cannot_trace_the_sandbox_s_first_process",
    "tests/engine/test_sandbox_walls.py::test_the_sandbox_s_first_process_moved_into_the_notebook_s_namespaces_diverts_no_tool_of_the_grader",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_reads_not_the_grader_s_environment",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_starts_no_process_even_in_a_user_namespace_of_its_own",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_holds_no_more_memory_than_its_limit",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_holds_no_more_memory_than_its_limit_in_shared_memory",
    "tests/engine/test_sandbox_walls.py::test_a_shell_command_cannot_raise_its_limits_even_in_a_user_namespace_of_its_own",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_sees_neither_the_instructor_s_files_nor_another_notebook_s",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_learns_no_path_of_the_machine",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_reads_no_key_of_the_grader_s_session_keyring",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_reads_no_key_of_the_grader_s_user_keyring",
    "tests/engine/test_sandbox_walls.py::test_the_notebook_reaches_no_network_nor_a_socket_of_the_machine",
    "tests/engine/test_sandbox_walls.py::test_a_shell_command_reaches_no_network_nor_a_socket_of_the_machine",
    "tests/engine/test_sandbox_walls.py::test_no_process_of_the_notebook_outlives_its_sandbox",
    "tests/engine/test_sandbox_walls.py::test_no_process_of_a_shell_command_outlives_it",
    "tests/engine/test_kernel_magics.py::test_every_test_cell_scores_as_under_stock_nbgrader",
    "tests/engine/test_kernel_magics.py::test_the_magics_decide_points_both_ways",
    "tests/engine/test_adversarial.py::test_no_trick_earns_a_point",
    "tests/engine/test_adversarial.py::test_honest_grades_do_not_depend_on_the_cheaters",
    "tests/engine/test_adversarial.py::test_no_process_of_a_notebook_outlives_the_batch",
    "tests/engine/test_adversarial.py::test_a_notebook_cannot_hold_more_memory_than_its_limit_in_other_processes",
    "tests/engine/test_nbgrader_course.py::test_every_cell_scores_as_stock_nbgrader_autograde_scores_it",
    "tests/engine/test_nbgrader_course.py::test_files_beside_the_notebooks_are_there_read_only_and_the_sources_are_not",
    "tests/course/test_linear_attention_grading.py::test_one_state_per_position_loses_the_task_at_d_64_whatever_the_notebook_measures",
]


def outcomes(log):
    """{test id: outcomes} from pytest's -rA summary (a parametrized test's under its own id)."""
    found = {}
    for outcome, node in re.findall(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", log, re.MULTILINE):
        found.setdefault(node.split("[")[0], set()).add(outcome)
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="the tests run as an ordinary user already")
def test_the_tests_that_grade_pass_as_an_ordinary_user():
    result = subprocess.run(as_user.command([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                                             *AS_USER]),
                            cwd=ROOT, capture_output=True, text=True)
    log = result.stdout + result.stderr
    # every one ran and passed: a test skipped there (or not found) proves nothing
    assert {test: {"PASSED"} for test in AS_USER} == {test: outcomes(log).get(test) for test in AS_USER}, log[-6000:]
    assert result.returncode == 0, log[-6000:]
