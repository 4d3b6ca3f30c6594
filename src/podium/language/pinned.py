"""The pinned tree of a registry workflow: a workflow read from a registry's checkout reads and
runs only what that tree holds (its `!file` includes and its `workflow:` sub-workflows).

A git registry's commit is unpacked into its own folder, stamped with the sha256 of every file
in it (STAMP, written by app/registries.py and checked on every reuse). A file under such a
folder belongs to that tree; an include or a sub-workflow it names (relative, `..`, absolute or
through a symbolic link, once resolved) must belong to it too, or the workflow would run what
no pin and no hash covers.
"""

from __future__ import annotations

from pathlib import Path

STAMP = ".podium-sha256"  # in the root folder of a registry checkout: its tree's sha256


def pinned_tree(path: Path) -> Path | None:
    """The registry checkout `path` belongs to (the folder holding STAMP), or None for a
    workflow that is not from a registry checkout."""
    for folder in path.resolve().parents:
        if (folder / STAMP).is_file():
            return folder
    return None


def escapes(origin: Path, target: Path) -> Path | None:
    """The pinned tree of `origin` when `target` lies outside it, else None."""
    tree = pinned_tree(origin)
    if tree is None or target.resolve().is_relative_to(tree):
        return None
    return tree


def outside_message(what: str, tree: Path) -> str:
    return (f"{what} is outside the pinned tree of this registry workflow ({tree}): a "
            "registry workflow reads and runs only what its pinned commit holds")
