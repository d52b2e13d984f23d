"""Crafting artifacts as an attacker or a damaged copy would: changed header
fields and records, re-sealed so that every hash matches again (what anyone
who can write the directory can do), so the loaders' other checks are hit."""

from __future__ import annotations

import hashlib
from pathlib import Path

from sparse_mlir.runtime import artifact

HEADER_FIELDS = ("magic", "reserved", "version", "flags", "inputs", "buffers", "files", "data_offset", "data_bytes",
                 "header_sha", "data_sha", "cpu")
RECORD_FIELDS = ("dtype", "rank", "shape", "offset", "bytes")


def header(blob: bytes | bytearray) -> dict[str, object]:
    return dict(zip(HEADER_FIELDS, artifact.HEADER.unpack_from(blob)))


def seal(blob: bytearray, files_from: Path | None = None) -> bytearray:
    """Recomputes weights.bin's hashes as the exporter does (with `files_from`,
    also every listed file's size and hash, read from that directory)."""
    values = header(blob)
    start = int(values["data_offset"])
    if files_from is not None:
        tables = artifact.HEADER.size + artifact.RECORD.size * (1 + int(values["inputs"]) + int(values["buffers"]))
        for i in range(int(values["files"])):
            at = tables + i * artifact.FILE_ENTRY.size
            name = artifact.FILE_ENTRY.unpack_from(blob, at)[0].rstrip(b"\0").decode()
            data = (files_from / name).read_bytes()
            artifact.FILE_ENTRY.pack_into(blob, at, name.encode(), len(data), hashlib.sha256(data).digest())
    if start <= len(blob):
        values["data_sha"] = hashlib.sha256(blob[start:]).digest()
    values["header_sha"] = bytes(32)
    artifact.HEADER.pack_into(blob, 0, *values.values())
    blob[artifact.HEADER_SHA_AT:artifact.HEADER_SHA_AT + 32] = hashlib.sha256(blob[:min(start, len(blob))]).digest()
    return blob


def reseal(path: Path) -> None:
    """Re-binds every file of the artifact at `path` as it now is."""
    weights = path / artifact.WEIGHTS
    weights.write_bytes(seal(bytearray(weights.read_bytes()), path))


def rewrite_header(path: Path, **fields: object) -> None:
    """Changes header fields of weights.bin and re-seals its hashes."""
    blob = bytearray((path / artifact.WEIGHTS).read_bytes())
    values = header(blob)
    values.update(fields)
    artifact.HEADER.pack_into(blob, 0, *values.values())
    (path / artifact.WEIGHTS).write_bytes(seal(blob))


def rewrite_record(path: Path, index: int, **fields: object) -> None:
    """Changes record `index` (0: the result, then the inputs, then the
    buffers) of weights.bin and re-seals its hashes."""
    blob = bytearray((path / artifact.WEIGHTS).read_bytes())
    at = artifact.HEADER.size + index * artifact.RECORD.size
    code, rank, *rest = artifact.RECORD.unpack_from(blob, at)
    values: dict[str, object] = {"dtype": code, "rank": rank, "shape": list(rest[:artifact.MAX_RANK]),
                                 "offset": rest[artifact.MAX_RANK], "bytes": rest[artifact.MAX_RANK + 1]}
    values.update(fields)
    artifact.RECORD.pack_into(blob, at, values["dtype"], values["rank"], *values["shape"], values["offset"],
                              values["bytes"])
    (path / artifact.WEIGHTS).write_bytes(seal(blob))


def record(path: Path, index: int) -> dict[str, object]:
    blob = (path / artifact.WEIGHTS).read_bytes()
    code, rank, *rest = artifact.RECORD.unpack_from(blob, artifact.HEADER.size + index * artifact.RECORD.size)
    return {"dtype": code, "rank": rank, "shape": list(rest[:artifact.MAX_RANK]), "offset": rest[artifact.MAX_RANK],
            "bytes": rest[artifact.MAX_RANK + 1]}
