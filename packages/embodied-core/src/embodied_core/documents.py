"""Bounded readers of the JSON and YAML documents we load from disk (configs, policy folders, checkpoints).

A document may come from someone else, so its size is checked before it is read and its shape before it is
used: a file over :data:`MAX_DOCUMENT_BYTES`, nesting deeper than :data:`MAX_DEPTH`, or (YAML) more than
:data:`MAX_YAML_NODES` nodes once aliases are expanded ("billion laughs": a few lines whose aliases unfold into
billions of values when a program walks them) is refused with an error naming the file and the limit, instead of
an out-of-memory or a ``RecursionError`` traceback. Nothing executes code: ``json`` and ``yaml.safe_load`` only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_DOCUMENT_BYTES", "MAX_YAML_NODES", "check_depth", "load_json_text", "load_yaml_text",
           "read_json_document", "read_text_bounded"]

MAX_DOCUMENT_BYTES = 16 * 2**20
"""Largest config / policy.json / meta.json accepted (real ones are a few KB; lora_base.json of a model in
thousands of shards some 100 KB)."""
MAX_DEPTH = 64
"""Deepest nesting of maps and lists (our configs nest 4 levels)."""
MAX_YAML_NODES = 1_000_000
"""Most YAML nodes a document may unfold into, counting an aliased node at every place it is used."""


def read_text_bounded(path: Path, *, error: type[Exception], limit: int = MAX_DOCUMENT_BYTES) -> str:
    """The text of ``path`` when it is at most ``limit`` bytes (checked before reading)."""
    size = path.stat().st_size
    if size > limit:
        raise error(f"{path}: {size:,} bytes; documents over {limit:,} bytes are refused (a config or policy file "
                    "is a few KB: this one is damaged or not what it claims to be)")
    return path.read_text(encoding="utf-8")


def check_depth(doc: Any, *, source: str, error: type[Exception], limit: int = MAX_DEPTH) -> Any:
    """``doc`` unchanged when its maps/lists nest at most ``limit`` deep (iterative, no recursion limit)."""
    stack = [(doc, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise error(f"{source}: nests maps/lists more than {limit} levels deep; refused")
        stack.extend((child, depth + 1) for child in children)
    return doc


def load_json_text(text: str, *, source: str, error: type[Exception]) -> Any:
    """Parses JSON text; ``error`` naming ``source`` when it is not JSON or nests too deeply."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise error(f"{source}: nests maps/lists more than {MAX_DEPTH} levels deep; refused") from None
    except ValueError as exc:  # JSONDecodeError, and ValueError for lone surrogates
        raise error(f"{source}: not readable JSON (truncated or corrupt): {exc}") from None
    return check_depth(doc, source=source, error=error)


def read_json_document(path: str | Path, *, error: type[Exception]) -> Any:
    """The JSON document in ``path`` within the size and depth limits; ``error`` naming the file otherwise."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: file is missing")
    try:
        text = read_text_bounded(path, error=error)
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not readable ({type(exc).__name__}: {exc})") from None
    return load_json_text(text, source=str(path), error=error)


def _count_nodes(root: Any, *, source: str, error: type[Exception]) -> None:
    """Height and alias-expanded size of a composed YAML node graph (a DAG: both memoized per node, so an alias
    bomb is measured without being unfolded); a node that contains itself is refused too."""
    import yaml

    done: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, height)
    active: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            done[id(node)] = (1, 1)
            continue
        children = ([c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if not children_done:
            if id(node) in done:
                continue
            if id(node) in active:
                raise error(f"{source}: an alias refers to a map or list that contains it; refused")
            active.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in done)
            continue
        if any(id(c) not in done for c in children):
            raise error(f"{source}: an alias refers to a map or list that contains it; refused")
        size = 1 + sum(done[id(c)][0] for c in children)
        height = 1 + max((done[id(c)][1] for c in children), default=0)
        if size > MAX_YAML_NODES:
            raise error(f"{source}: unfolds into more than {MAX_YAML_NODES:,} values once its aliases are expanded; "
                        "refused (an alias bomb, or a document far larger than any config)")
        if height > MAX_DEPTH + 1:  # + 1: scalars count as a level here, not in check_depth
            raise error(f"{source}: nests maps/lists more than {MAX_DEPTH} levels deep; refused")
        done[id(node)] = (size, height)
        active.discard(id(node))


def load_yaml_text(text: str, *, source: str, error: type[Exception]) -> Any:
    """``yaml.safe_load`` of ``text`` after checking its depth and alias-expanded size.

    Raises:
        ``error`` naming ``source``: not YAML, too deep, or too large once expanded. ``yaml.YAMLError`` is turned
        into ``error`` as well.
    """
    import yaml

    if len(text.encode("utf-8", "surrogateescape")) > MAX_DOCUMENT_BYTES:
        raise error(f"{source}: over {MAX_DOCUMENT_BYTES:,} bytes; documents this large are refused")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _count_nodes(node, source=source, error=error)
        return yaml.safe_load(text)
    except RecursionError:
        raise error(f"{source}: nests maps/lists more than {MAX_DEPTH} levels deep; refused") from None
    except yaml.YAMLError as exc:
        raise error(f"{source}: not valid YAML: {exc}") from None
