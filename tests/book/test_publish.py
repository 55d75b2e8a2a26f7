"""Publishing the website: `make publish` pushes a built site to the gh-pages
branch of a remote with ghp-import, and .github/workflows/publish.yml, which
deploys it from GitHub Actions, passes actionlint.

`make publish` builds the book first; these tests give it a small site
already built (SITE=FOLDER), so that they build nothing, and a temporary
repository (GIT_DIR, which ghp-import follows) in place of the course's own,
whose branches they leave alone."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support import COURSE

BIN = Path(sys.executable).parent
WORKFLOWS = sorted((COURSE.root / ".github" / "workflows").glob("*.yml"))
# A small site with what GitHub Pages' Jekyll would leave out: folders whose names start with "_".
SITE = {"index.html": "<p>the course</p>", "_static/style.css": "p {}", "book/intro.html": "<p>intro</p>",
        "_images/figure.png": "not really a PNG"}


def git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def write_site(folder, files):
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def make(*args, git_dir=None):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    if git_dir:
        env["GIT_DIR"] = str(git_dir)
    return subprocess.run(["make", "--no-print-directory", *args], cwd=COURSE.root, env=env,
                          capture_output=True, text=True, timeout=120)


def published(remote):
    """The files of the remote's gh-pages branch, with their text."""
    names = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "gh-pages").split()
    return {name: git("--git-dir", str(remote), "show", f"gh-pages:{name}") for name in names}


def test_make_publish_pushes_the_site_to_the_remote_gh_pages_branch_with_nojekyll(tmp_path):
    site, remote, work = tmp_path / "site", tmp_path / "remote.git", tmp_path / "work"
    write_site(site, SITE)
    git("init", "--quiet", "--bare", str(remote))
    git("init", "--quiet", str(work))
    git("config", "user.name", "Instructor", cwd=work)
    git("config", "user.email", "instructor@example.org", cwd=work)

    result = make("publish", f"SITE={site}", f"REMOTE={remote}", git_dir=work / ".git")
    assert result.returncode == 0, result.stdout + result.stderr
    assert published(remote) == {**SITE, ".nojekyll": ""}
    assert git("--git-dir", str(remote), "log", "--format=%s", "gh-pages").splitlines() == ["The course's website"]

    # Published again, the branch is the new site: a page removed is gone, one added is there.
    (site / "book" / "intro.html").unlink()
    write_site(site, {"book/attention.html": "<p>attention</p>"})
    result = make("publish", f"SITE={site}", f"REMOTE={remote}", git_dir=work / ".git")
    assert result.returncode == 0, result.stdout + result.stderr
    expected = {name: text for name, text in SITE.items() if name != "book/intro.html"}
    assert published(remote) == {**expected, "book/attention.html": "<p>attention</p>", ".nojekyll": ""}
    # and the course's own repository has no gh-pages branch from these tests
    assert git("branch", "--list", "gh-pages", cwd=COURSE.root).strip() == ""


def test_make_publish_builds_the_edition_it_publishes():
    """Without SITE, `make publish` builds the site it publishes, the class
    edition with EDITION=class, and pushes to origin unless told (make -n shows what it would run)."""
    open_edition = make("-n", "publish")
    assert open_edition.returncode == 0, open_edition.stderr
    assert "jupyter-book build" in open_edition.stdout and "build_edition.py" not in open_edition.stdout
    assert '--remote "origin"' in open_edition.stdout and '"_build/html"' in open_edition.stdout

    class_edition = make("-n", "publish", "EDITION=class", "REMOTE=git@example.org:course/site.git")
    assert class_edition.returncode == 0, class_edition.stderr
    assert "COURSE_EDITION=class" in class_edition.stdout and "jupyter-book build" not in class_edition.stdout
    assert '--remote "git@example.org:course/site.git"' in class_edition.stdout
    assert '"_build/class/html"' in class_edition.stdout

    misspelt = make("-n", "publish", "EDITION=classs")
    assert misspelt.returncode != 0 and 'EDITION is "classs"' in misspelt.stderr


def test_the_workflows_pass_actionlint():
    assert WORKFLOWS, "no workflow in .github/workflows"
    result = subprocess.run([str(BIN / "actionlint"), "-no-color", *map(str, WORKFLOWS)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_fails_on_a_broken_workflow(tmp_path):
    """The check above can fail: a permission misspelt and an expression that does not parse."""
    broken = (COURSE.root / ".github" / "workflows" / "publish.yml").read_text(encoding="utf-8")
    broken = broken.replace("id-token: write", "id-tokens: write").replace(
        "vars.COURSE_EDITION != 'class'", "vars.COURSE_EDITION != ")
    assert broken.count("id-tokens") == 1
    (tmp_path / "broken.yml").write_text(broken, encoding="utf-8")
    result = subprocess.run([str(BIN / "actionlint"), "-no-color", str(tmp_path / "broken.yml")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "id-tokens" in result.stdout and "COURSE_EDITION" in result.stdout, result.stdout


def test_the_workflow_builds_on_main_and_deploys_to_github_pages():
    workflow = yaml.safe_load((COURSE.root / ".github" / "workflows" / "publish.yml").read_text(encoding="utf-8"))
    triggers = workflow[True]   # YAML 1.1 reads the key `on` as true
    assert triggers["push"]["branches"] == ["main"]
    assert {"pages": "write", "id-token": "write"}.items() <= workflow["permissions"].items()
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    runs = {step.get("if"): step["run"] for step in build["steps"] if "run" in step and "if" in step}
    assert runs == {"vars.COURSE_EDITION != 'class'": "make book", "vars.COURSE_EDITION == 'class'": "make class-book"}
    uploads = [step for step in build["steps"] if step.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert len(uploads) == 1 and uploads[0]["with"]["path"] == "${{ env.SITE }}"
    assert build["env"]["SITE"] == "${{ vars.COURSE_EDITION == 'class' && '_build/class/html' || '_build/html' }}"
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]
