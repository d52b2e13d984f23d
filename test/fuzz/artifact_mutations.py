"""Format-agnostic damage to an exported artifact: mutations of its files and re-sealing.

Nothing here knows the artifact's layout: a mutation names a file of the
directory and bytes of it (a little-endian word at an offset, a flipped bit,
a truncation, ...) or a value of a JSON file. `Seals` finds, in a valid
artifact, every place that stores a CRC-32 or SHA-256 of a file (or of a
file's tail, e.g. a header's checksum of what follows it), as raw bytes or
hex text, and after a mutation writes the new digests there, as a forger
would (the digests are not secret). A re-sealed artifact is a genuinely
different one, not a corrupted one: it exercises the loaders past their
checksums.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

DIGESTS: dict[str, Callable[[bytes], bytes]] = {
    "crc32_le": lambda b: struct.pack("<I", zlib.crc32(b)),
    "crc32_be": lambda b: struct.pack(">I", zlib.crc32(b)),
    "crc32_hex": lambda b: f"{zlib.crc32(b):08x}".encode(),
    "sha256": lambda b: hashlib.sha256(b).digest(),
    "sha256_hex": lambda b: hashlib.sha256(b).hexdigest().encode(),
}
SELF_SEAL_SPAN = 1024  # a file's own checksum covers its bytes from one of its first SELF_SEAL_SPAN offsets


def read_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class Seal:
    holder: str      # the file storing the digest
    at: int          # its byte offset there
    source: str      # the file digested
    start: int       # from this offset of it (0: the whole file)
    digest: str      # a DIGESTS key


def _occurrences(blob: bytes, needle: bytes, limit: int | None = None) -> list[int]:
    found, at = [], blob.find(needle)
    while at != -1 and (limit is None or at < limit):
        found.append(at)
        at = blob.find(needle, at + 1)
    return found


def find_seals(files: dict[str, bytes]) -> list[Seal]:
    seals = []
    for source, data in files.items():
        for name, digest in DIGESTS.items():
            value = digest(data)
            for holder, blob in files.items():
                if holder != source:
                    seals += [Seal(holder, at, source, 0, name) for at in _occurrences(blob, value)]
        for start in range(1, min(len(data), SELF_SEAL_SPAN)):
            for name in ("crc32_le", "sha256"):
                value = DIGESTS[name](data[start:])
                seals += [Seal(source, at, source, start, name) for at in _occurrences(data, value, start)
                          if at + len(value) <= start]
    return seals


def reseal(root: Path, seals: list[Seal]) -> None:
    """Rewrites every seal of the (mutated) tree under `root` until none
    changes, then the format's own binding where weights.bin has one."""
    for _ in range(6):
        changed = False
        for seal in seals:
            source, holder = root / seal.source, root / seal.holder
            if not (source.is_file() and holder.is_file()):
                continue
            value = DIGESTS[seal.digest](source.read_bytes()[seal.start:])
            blob = bytearray(holder.read_bytes())
            if seal.at + len(value) <= len(blob) and blob[seal.at:seal.at + len(value)] != value:
                blob[seal.at:seal.at + len(value)] = value
                holder.write_bytes(bytes(blob))
                changed = True
        if not changed:
            break
    _seal_header(root)


def _seal_header(root: Path) -> None:
    """Format 2's header hashes itself with its hash field zeroed, which no
    digest of a file or tail reproduces: re-bound as the exporter binds it
    (the loader tests' own crafting code), where the header still parses."""
    weights = root / "weights.bin"
    if not weights.is_file() or weights.is_symlink():
        return
    # The binding reads every listed file: a FIFO among them would block it forever.
    if any(not (p.is_dir() or p.is_file()) for p in root.rglob("*")):
        return
    tests = str(Path(__file__).resolve().parents[1] / "python")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from e2e.crafting import seal   # noqa: E402  (test/python/e2e)
    try:
        sealed = seal(bytearray(weights.read_bytes()), root)
    except (struct.error, OSError, UnicodeDecodeError, ValueError):
        return   # too damaged to re-bind (short, or a listed file is missing): left as it is
    weights.write_bytes(bytes(sealed))


# ---------------------------------------------------------------- mutations

WORD_VALUES = ("zero", "one", "max", "min_signed", "minus_one", "minus_eight", "int31", "int32", "2^40",
               "size", "size+1", "size-1", "2size", "old+1", "old-1", "0x7f", "0xff", "0xffff")


def _word(kind: str, old: int, size: int, width: int) -> int:
    top = 1 << (8 * width)
    return {"zero": 0, "one": 1, "max": top - 1, "min_signed": top >> 1, "minus_one": -1, "minus_eight": -8,
            "int31": 0x7FFFFFFF, "int32": 0x80000000, "2^40": 1 << 40, "size": size, "size+1": size + 1,
            "size-1": size - 1, "2size": 2 * size, "old+1": old + 1, "old-1": old - 1, "0x7f": 0x7F,
            "0xff": 0xFF, "0xffff": 0xFFFF}[kind] % top


def _json_paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    paths = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            paths += _json_paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            paths += _json_paths(item, prefix + (i,))
    return paths


JSON_VALUES = ("zero", "negative", "huge", "float", "empty_string", "long_string", "null", "list", "object",
               "nested", "true", "drop")


NESTED = "__nested__"  # written as 100 000 nested lists (json.dumps would recurse that deep)


def _json_value(kind: str) -> Any:
    nested = NESTED
    return {"zero": 0, "negative": -1, "huge": 2**70, "float": 1e308, "empty_string": "", "long_string": "A" * 100_000,
            "null": None, "list": [], "object": {}, "nested": nested, "true": True}[kind]


def mutate(root: Path, mutation: dict[str, Any], other: Path | None = None) -> str:
    """Applies one mutation (see the strategy in test_fuzz_artifacts.py) to
    the artifact directory `root`; returns what it did, for the report."""
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    if not files:
        return "no files left"
    wanted = mutation["file"]
    name = wanted if wanted in files else files[mutation["offset"] % len(files)]  # "*": any file
    path = root / name
    op = mutation["op"]
    if op == "delete":
        path.unlink()
        return f"deleted {name}"
    if op == "fifo":
        path.unlink()
        os.mkfifo(path)
        return f"{name} replaced by a FIFO"
    if op == "directory":
        path.unlink()
        path.mkdir()
        return f"{name} replaced by a directory"
    if op == "symlink_loop":
        path.unlink()
        path.symlink_to(path.name)
        return f"{name} replaced by a symlink to itself"
    if op == "swap":
        assert other is not None
        candidates = sorted(str(p.relative_to(other)) for p in other.rglob("*") if p.is_file())
        donor = other / (name if name in candidates else candidates[mutation["offset"] % len(candidates)])
        path.write_bytes(donor.read_bytes())
        return f"{name} replaced by another artifact's {donor.relative_to(other)}"
    blob = bytearray(path.read_bytes())
    size = len(blob)
    if op == "json":
        try:
            document = json.loads(blob)
        except (ValueError, RecursionError):
            op = "flip"  # not a JSON file: damage its bytes instead
        else:
            paths = _json_paths(document)
            where = paths[mutation["offset"] % len(paths)]
            if not where:
                document = _json_value(mutation["json"]) if mutation["json"] != "drop" else {}
            else:
                parent = document
                for key in where[:-1]:
                    parent = parent[key]
                if mutation["json"] == "drop":
                    del parent[where[-1]]
                else:
                    parent[where[-1]] = _json_value(mutation["json"])
            text = json.dumps(document).replace(f'"{NESTED}"', "[" * 100_000 + "0" + "]" * 100_000)
            path.write_text(text)
            return f"{name}: {'/'.join(map(str, where)) or '<root>'} := {mutation['json']}"
    if op == "word":
        width = mutation["width"]
        span = min(size, mutation["zone"])
        if span < width:
            return f"{name}: too short for a {width}-byte word"
        at = (mutation["offset"] % (span - width + 1)) // (width if mutation["aligned"] else 1) * (
            width if mutation["aligned"] else 1)
        old = int.from_bytes(blob[at:at + width], "little")
        value = _word(mutation["value"], old, size, width)
        blob[at:at + width] = value.to_bytes(width, "little")
        path.write_bytes(bytes(blob))
        return f"{name}[{at}:{at + width}] {old:#x} -> {value:#x} ({mutation['value']})"
    if op == "flip":
        if not size:
            return f"{name}: empty"
        at = mutation["offset"] % min(size, mutation["zone"])
        blob[at] ^= 1 << (mutation["bit"] % 8)
        path.write_bytes(bytes(blob))
        return f"{name}[{at}] bit {mutation['bit'] % 8} flipped"
    if op == "truncate":
        keep = mutation["offset"] % (size + 1) if mutation["value"] != "zero" else 0
        path.write_bytes(bytes(blob[:keep]))
        return f"{name} truncated to {keep} of {size} bytes"
    if op == "extend":
        extra = mutation["offset"] % 4096 + 1
        path.write_bytes(bytes(blob) + bytes([mutation["bit"] % 256]) * extra)
        return f"{name} extended by {extra} bytes"
    raise ValueError(f"unknown mutation {op}")
