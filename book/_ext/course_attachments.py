"""Sphinx: show a notebook's diagram attachments from chapters/figures/ on the website.

A chapter refers to a diagram as ``![alt](attachment:NAME.png)`` and carries the PNG (2x
density) as a cell attachment (tools/embed_diagrams.py), so JupyterLab, Colab and nbconvert
show it from the notebook alone. myst-nb does not read attachments; this transform points
each such image at the vector drawing of the same diagram, ``chapters/figures/NAME.svg``
(sharp at any zoom; the Chinese build picks ``NAME.zh_CN.svg``), which Sphinx then copies
into the site like any image (one file per diagram, cached by the browser, and a URL a
reader can open full size).
"""

from __future__ import annotations

from docutils import nodes
from sphinx.transforms import SphinxTransform

PREFIX = "attachment:"


class AttachmentImages(SphinxTransform):
    default_priority = 200  # before Sphinx's image collector reads the URIs

    def apply(self, **kwargs) -> None:
        for image in self.document.findall(nodes.image):
            uri = image.get("uri", "")
            if uri.startswith(PREFIX):
                name = uri[len(PREFIX) :]
                if name.endswith(".png"):
                    name = name[: -len(".png")] + ".svg"
                image["uri"] = "/chapters/figures/" + name


def setup(app):
    app.setup_extension(
        "course_links"
    )  # book/_ext/course_links.py: no dead links on the site
    app.add_transform(AttachmentImages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
