"""Run a command as an ordinary user, from root, without changing the host.

`python -m tests.engine.as_user UID -- command...`, run by root under `unshare --mount` (`command`
does that): in that private mount namespace, every folder on the way to the repository and to
Python that the user cannot pass (root's home, 0700, holds pyenv's Python; CI clones into a
0700 `mktemp -d`) is covered by an empty in-memory folder (0755) into which the paths needed
are bound back, nothing else of it shown (a needed folder that others cannot read itself is made
readable while the command runs); then the command runs as `UID` (no account needed: its home
is a private temporary folder), and the namespace ends with it.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
UID = 64_123  # the ordinary user: no account, outside the sandboxes' uids (sandboxes.BASE_UID + pid)


def command(argv, uid=UID):
    """The command line, for root, that runs `argv` as `uid` (see the module's docstring)."""
    return ["unshare", "--mount", "--propagation", "private", "--",
            sys.executable, "-m", "tests.engine.as_user", str(uid), "--", *argv]


def without_user_namespaces(argv):
    """The command line, for root, that runs `argv` (a `command`) on a machine that allows no
    user namespaces: in one of root's, all users mapped, whose limit of them is 0 (the host's
    setting is unchanged)."""
    return [sys.executable, "-m", "tests.engine.as_user", "--no-user-namespaces", "--", *argv]


def _no_user_namespaces(argv):
    import ctypes
    ready, go = os.pipe(), os.pipe()
    child = os.fork()
    if child == 0:
        if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:  # CLONE_NEWUSER
            os._exit(3)
        os.write(ready[1], b"x")
        os.read(go[0], 1)  # the parent has mapped its users
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        Path("/proc/sys/user/max_user_namespaces").write_text("0")
        os.execvp(argv[0], argv)
    os.read(ready[0], 1)
    for name in ("uid_map", "gid_map"):
        Path(f"/proc/{child}/{name}").write_text("0 0 65536\n")
    os.write(go[1], b"x")
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])


def needed():
    """The paths the user must reach: the repository, the virtual environment and Python's own."""
    paths = {ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable)}
    return sorted({Path(os.path.realpath(path)) for path in paths} | paths)


def passable(paths):
    """Cover each folder on the way to `paths` that others cannot pass (shallowest first) with an
    empty tmpfs, the entries on the way bound back into it (opened before they are covered)."""
    while True:
        blocked = sorted({ancestor for path in paths for ancestor in path.parents
                          if not os.stat(ancestor).st_mode & 0o001},
                         key=lambda folder: len(folder.parts))
        if not blocked:
            return
        folder = blocked[0]
        entries = sorted({path.relative_to(folder).parts[0] for path in paths if folder in path.parents})
        fds = {name: os.open(folder / name, os.O_PATH) for name in entries}
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "tmpfs", str(folder)], check=True)
        for name, fd in fds.items():
            target = folder / name
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                target.mkdir()
            else:
                target.touch()
            # the fd, not its path: mount would resolve that to the tmpfs that now covers it
            subprocess.run(["mount", "--no-canonicalize", "--bind", f"/proc/self/fd/{fd}", str(target)],
                           check=True, pass_fds=[fd])
            os.close(fd)


def main(uid, argv):
    assert os.geteuid() == 0, "as_user runs as root, in a mount namespace of its own"
    paths = needed()
    passable(paths)
    # a needed folder others cannot read itself (a clone made in `mktemp -d`): readable while the
    # command runs, its mode restored after
    closed = {path: os.stat(path).st_mode & 0o7777 for path in paths
              if path.is_dir() and os.stat(path).st_mode & 0o005 != 0o005}
    try:
        for path, mode in closed.items():
            os.chmod(path, mode | 0o005)
        return _run(uid, argv)
    finally:
        for path, mode in closed.items():
            os.chmod(path, mode)


def _run(uid, argv):
    home = Path(tempfile.mkdtemp(prefix="as-user-"))
    os.chown(home, uid, uid)
    environment = {**os.environ, "HOME": str(home), "USER": "grader-test", "LOGNAME": "grader-test",
                   "TMPDIR": str(home), "PYTHONPATH": str(ROOT),
                   # git reads a repository of another user's only if told it is safe
                   "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}

    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    try:
        return subprocess.run(argv, preexec_fn=drop, env=environment, cwd=ROOT).returncode
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    separator = sys.argv.index("--")
    if sys.argv[1] == "--no-user-namespaces":
        sys.exit(_no_user_namespaces(sys.argv[separator + 1:]))
    sys.exit(main(int(sys.argv[1]), sys.argv[separator + 1:]))
