"""Fallback warnings named by the torch op the user wrote.

smlir-sparse-fallback names the MLIR op that has no sparse lowering
('linalg.generic'); what a user recognizes is the torch op. Each op of the
imported module carries its torch.fx node's name as its location, so the
warning is rewritten to name that node's target (`aten.exp.default`), and
reported once per (torch op, tensor, format).
"""

from __future__ import annotations

import re
from typing import AbstractSet, Mapping, Protocol, Sequence

_FALLBACK = re.compile(r"^no sparse lowering for '([^']+)' (reading tensor .*)$")


class _Node(Protocol):
    name: str
    target: str


def name_torch_ops(messages: Sequence[str], locations: Sequence[AbstractSet[str]], nodes: Mapping[str, _Node]) -> list[str]:
    """`messages` (with their diagnostics' `locations`, torch.fx node names) naming torch ops, once each."""
    named: dict[tuple[str, str], str] = {}
    for message, location in zip(messages, locations):
        match = _FALLBACK.match(message)
        node = next((nodes[name] for name in sorted(location) if name in nodes), None)
        if match is None or node is None:
            named.setdefault((message, ""), message)
            continue
        mlir_op, rest = match.groups()
        named.setdefault((node.target, rest), f"no sparse lowering for torch op '{node.target}' "
                                              f"(node '{node.name}', lowered to '{mlir_op}') {rest}")
    return list(named.values())
