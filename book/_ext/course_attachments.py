"""Sphinx: show a notebook's diagram attachments from chapters/figures/ on the website.

A chapter refers to a diagram as ``![alt](attachment:NAME.svg)`` and carries the SVG as a
cell attachment (tools/embed_diagrams.py), so Jupyter and Colab show it from the notebook
alone. myst-nb does not read attachments; this transform points each such image at the
same file in ``chapters/figures/``, which Sphinx then copies into the site like any image
(one file per diagram, cached by the browser, and a URL a reader can open full size).
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
                image["uri"] = "/chapters/figures/" + uri[len(PREFIX) :]


def setup(app):
    app.add_transform(AttachmentImages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
