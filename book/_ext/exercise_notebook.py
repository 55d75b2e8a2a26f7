"""The exercise notebook of a chapter, where readers look for it.

The directive ``exercise-notebook``, given the notebook's path relative to the
chapter, copies the notebook into the site (as ``{download}`` does) and shows
a download button, with a link that opens the notebook in Colab. The same
download is added to the download menu at the top of the chapter.

An edition may offer only some exercises (``exercises_offered``, the names
of their notebooks without ``.ipynb``; None, the default, offers all): the
class edition (graded_code.py) offers those that the term has released. The
others get a sentence instead of the button, the Colab link and the menu
entry, and their notebooks are not copied into the site.

Colab opens only ``.ipynb`` files of a repository, so the ``colab_url`` of
``launch_buttons`` in ``_config.yml`` is taken out of the theme's launch menu
(whose chapters are MyST Markdown) and used here, with the repository's URL
and branch.
"""

import posixpath
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)


class ExerciseNotebook(SphinxDirective):
    required_arguments = 1

    def run(self):
        target = self.arguments[0]
        name = posixpath.basename(target)
        offered = self.config.exercises_offered
        if offered is not None and posixpath.splitext(name)[0] not in offered:
            return [nodes.container("", nodes.paragraph(
                text=f"The exercise notebook {name} is released by your instructor when the class "
                     "reaches this chapter."), classes=["exercise-notebook", "exercise-unreleased"])]
        download = addnodes.download_reference(
            "", "", refdoc=self.env.docname, refdomain="", reftype="download", refexplicit=True,
            refwarn=False, reftarget=target,
            classes=["exercise-download", "sd-btn", "sd-btn-primary", "sd-shadow-sm"])
        download += nodes.inline(text=f"Download the exercise notebook ({name})")
        buttons = nodes.paragraph("", "", download)
        colab = colab_link(self.config, self.env.relfn2path(target, self.env.docname)[0])
        if colab:
            buttons += nodes.Text(" ")
            buttons += nodes.reference("", "Open it in Colab", refuri=colab,
                                       classes=["exercise-colab", "sd-btn", "sd-btn-outline-primary"])
        return [nodes.container("", buttons, classes=["exercise-notebook"])]


def colab_link(config, path_in_book):
    """The Colab URL of a notebook of the book's GitHub repository, or None."""
    options = config.html_theme_options
    repository = options.get("repository_url", "").rstrip("/")
    if not (config.exercise_colab_url and repository):
        return None
    if not repository.startswith("https://github.com/"):
        logger.warning(f"Colab opens notebooks from GitHub only, not from {repository}")
        return None
    org, repo = repository.removeprefix("https://github.com/").split("/")[:2]
    branch = options.get("repository_branch") or "master"  # as sphinx-book-theme
    path = posixpath.join(options.get("path_to_docs", "").strip("/"), Path(path_in_book).as_posix())
    return f"{config.exercise_colab_url.rstrip('/')}/github/{org}/{repo}/blob/{branch}/{path}"


def take_colab_for_exercises(app, config):
    launch_buttons = config.html_theme_options.get("launch_buttons", {})
    config.exercise_colab_url = launch_buttons.pop("colab_url", "")


def add_to_download_menu(app, pagename, templatename, context, doctree):
    """Put the chapter's exercise notebook first in the page's download menu."""
    if doctree is None:
        return
    download = next((node for node in doctree.findall(addnodes.download_reference)
                     if "exercise-download" in node["classes"] and "filename" in node), None)
    menu = next((button for button in context.get("header_buttons", [])
                 if button.get("label") == "download-buttons"), None)
    if download is None or menu is None:
        return
    menu["buttons"].insert(0, {
        "type": "link",
        "url": context["pathto"]("_downloads", 1) + "/" + download["filename"],
        "text": "exercise .ipynb",
        "tooltip": "Download the exercise notebook",
        "icon": "fas fa-pencil-alt",
        "label": "download-exercise-button",
    })


def setup(app):
    app.add_config_value("exercise_colab_url", "", "env")
    app.add_config_value("exercises_offered", None, "env")
    app.add_directive("exercise-notebook", ExerciseNotebook)
    app.connect("config-inited", take_colab_for_exercises)
    # after the theme has built its header buttons (priority 501)
    app.connect("html-page-context", add_to_download_menu, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
