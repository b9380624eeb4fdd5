"""Read one YAML file safely into plain values that remember their line numbers.

Only plain scalars, lists and mappings are accepted: the document is composed into nodes and never
constructed into objects, so tags such as `!!python/object` cannot run anything. Files over 1 MiB,
bytes that are not UTF-8, duplicate keys and alias bombs are reported as problems, not exceptions.
"""

from __future__ import annotations

import os

from ..errors import NmZonesError
from ..files import UntrustedFile, open_regular, read_all
from .model import Problem

TYPE_CHECKING = False  # typing itself would cost every event its import
if TYPE_CHECKING:
    import yaml

MAX_FILE_BYTES = 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 32

_SCALAR_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:timestamp",
}
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"

class LocMap(dict):
    """A mapping that knows its own line and the line of each key."""

    line: int = 1
    key_lines: dict


class LocList(list):
    """A list that knows its own line and the line of each item."""

    line: int = 1
    item_lines: list


class _Converter:
    def __init__(self, yaml, path: str, problems: list[Problem]):
        self.path = path
        self.problems = problems
        self.count = 0
        self.constructor = yaml.constructor.SafeConstructor()
        self.error = yaml.YAMLError

    def problem(self, line: int, key: str, message: str) -> None:
        self.problems.append(Problem(self.path, line, key, message))

    def convert(self, node: yaml.Node, key: str, depth: int = 0):
        self.count += 1
        line = node.start_mark.line + 1
        if self.count > MAX_NODES or depth > MAX_DEPTH:
            raise _TooBig(line)
        if node.id == "scalar":
            return self._scalar(node, key, line)
        if node.id == "sequence":
            return self._sequence(node, key, line, depth)
        if node.tag != _MAP_TAG:
            self.problem(line, key, f"YAML tag {node.tag} is not allowed (plain mappings only)")
            return None
        return self._mapping(node, key, line, depth)

    def _scalar(self, node: yaml.ScalarNode, key: str, line: int):
        if node.tag not in _SCALAR_TAGS:
            self.problem(line, key, f"YAML tag {node.tag} is not allowed (plain values only)")
            return None
        if node.tag == "tag:yaml.org,2002:timestamp":
            return node.value
        try:
            return self.constructor.construct_object(node)
        except self.error as error:
            self.problem(line, key, f"cannot read value {node.value!r}: {error.problem}")
            return None

    def _sequence(self, node: yaml.SequenceNode, key: str, line: int, depth: int):
        if node.tag != _SEQ_TAG:
            self.problem(line, key, f"YAML tag {node.tag} is not allowed (plain lists only)")
            return None
        items = LocList()
        items.line = line
        items.item_lines = []
        for index, child in enumerate(node.value):
            items.append(self.convert(child, f"{key}[{index}]", depth + 1))
            items.item_lines.append(child.start_mark.line + 1)
        return items

    def _mapping(self, node: yaml.MappingNode, key: str, line: int, depth: int) -> LocMap:
        mapping = LocMap()
        mapping.line = line
        mapping.key_lines = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if key_node.id != "scalar" or key_node.tag not in _SCALAR_TAGS:
                self.problem(key_line, key, "keys must be plain text")
                continue
            name = str(key_node.value)
            path = f"{key}.{name}" if key else name
            if name in mapping:
                first = mapping.key_lines[name]
                self.problem(key_line, path, f"duplicate key (first given on line {first})")
                continue
            mapping.key_lines[name] = key_line
            mapping[name] = self.convert(value_node, path, depth + 1)
        return mapping


class _TooBig(NmZonesError):
    """A document past the size limit, at `line` (turned into a Problem below)."""

    def __init__(self, line: int):
        self.line = line


def _read_text(path: str, problems: list[Problem]) -> str | None:
    """The file as text: a regular file of at most 1 MiB, UTF-8, without NUL."""
    try:  # never blocks: a FIFO or a device where a file should be is refused
        fd = open_regular(path)
        size = os.fstat(fd).st_size
        data = read_all(fd, MAX_FILE_BYTES)
    except UntrustedFile:
        problems.append(Problem(path, 1, "", "not a regular file (a file is expected here)"))
        return None
    except OSError as error:
        problems.append(Problem(path, 1, "", f"cannot read file: {error.strerror}"))
        return None
    if size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
        problems.append(Problem(path, 1, "", f"file is larger than 1 MiB ({size} bytes)"))
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        problems.append(
            Problem(path, line, "", "bytes that are not UTF-8 (save the file as UTF-8)")
        )
        return None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        problems.append(Problem(path, line, "", "NUL character in file (a text file is expected)"))
        return None
    return text


def read_yaml(path: str, problems: list[Problem]):
    """Return the document's value (None when empty or unreadable); add problems found."""
    import yaml  # here: a command that finds the config kept (config/kept.py) never reads one

    text = _read_text(path, problems)
    if text is None:
        return None
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else 1
        problems.append(Problem(path, line, "", f"not valid YAML: {error.problem}"))
        return None
    except yaml.YAMLError as error:
        problems.append(Problem(path, 1, "", f"not valid YAML: {error}"))
        return None
    if node is None:
        return None
    converter = _Converter(yaml, path, problems)
    try:
        return converter.convert(node, "")
    except _TooBig as error:
        problems.append(
            Problem(path, error.line, "", "document too large or too deeply nested after aliases")
        )
        return None
    except RecursionError:
        problems.append(Problem(path, 1, "", "document nested too deeply"))
        return None
