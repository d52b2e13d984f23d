"""torch.nn.Module -> torch.export -> torch-mlir FX importer -> linalg text.

Parameters are lifted to function arguments (named by their fully qualified
names, in `named_parameters()` order, before the model's inputs) instead of
being embedded as constants. torch.export runs here; torch-mlir, which
bundles its own LLVM/MLIR that clashes with the `mlir` wheel in one process,
runs in a server process on the saved program; its module comes back as text.
The server starts on the first compile (while the model is exported and its
weights pruned here) and serves every later compile of the process; a
program it has imported before (same graph and constants) is not sent again.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from sparse_mlir.errors import SparseMLIRError
from sparse_mlir.compiler.importers.unsupported import REGIONS_HINT, data_dependent_nodes, foreign_ops


class ExportError(SparseMLIRError):
    """torch.export or torch-mlir could not capture the model."""


@dataclass(frozen=True)
class NodeInfo:
    """A torch.export node (before decompositions): ops from it carry loc("<name>")."""

    name: str
    target: str
    shape: tuple[int, ...] | None
    dtype: str | None


@dataclass(frozen=True)
class ImportedModel:
    text: str                        # linalg-on-tensors MLIR (function @main), with locations
    param_names: list[str]           # arguments 0..P-1, in order
    params: list[torch.Tensor]       # their values (detached)
    num_inputs: int                  # arguments P.. are the model's inputs
    nodes: dict[str, NodeInfo]       # intermediate tensors by torch.fx node name
    graph: tuple[GraphNode, ...] = ()  # the export graph's data flow (placeholders first)
    program: Any = None              # the torch.export program (parameters as leading inputs)


@dataclass(frozen=True)
class GraphNode:
    """One node of the torch.export graph: what it computes from which nodes."""

    name: str
    op: str                          # placeholder | call_function | output
    target: str
    inputs: tuple[str, ...]
    num_users: int
    # Positional arguments: numbers and strings as given, None for the rest
    # (nodes, lists, None); () when unknown. Zero rules need hardtanh's range.
    scalar_args: tuple[bool | int | float | str | None, ...] = ()


class _ParamsAsInputs(torch.nn.Module):
    """Calls `model` with its parameters passed in as leading inputs."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str]) -> None:
        super().__init__()
        # Not a registered submodule: torch.export would also store the
        # model's parameters (which the inputs replace) in the program, and
        # every compile would write and the worker read them (28 MB for a
        # BERT layer). Its buffers become the program's constants.
        object.__setattr__(self, "model", model)
        self.names = list(names)

    def forward(self, *args: torch.Tensor) -> Any:
        count = len(self.names)
        return torch.func.functional_call(self.model, dict(zip(self.names, args[:count])), args[count:])


_WORKER = Path(__file__).resolve().with_name("_torch_mlir_worker.py")


class _ImportServer:
    """The torch-mlir worker process, kept for the life of this process.

    Requests are serialized (one lock); a worker that died (killed, out of
    memory) is restarted once per request, and its stderr log names the cause.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._log: Any = None

    def start(self) -> None:
        """Starts the worker if it is not running (returns at once)."""
        with self._lock:
            self._start()

    def _start(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self._release()   # a dead worker's pipes and log
        self._log = tempfile.TemporaryFile(mode="w+", prefix="sparse_mlir_importer_")
        self._process = subprocess.Popen([sys.executable, str(_WORKER)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1)

    def request(self, program: Path, out: Path, nodes: Path) -> str | None:
        """Imports `program`; returns None on success, else the worker's error text."""
        line = json.dumps({"program": str(program), "out": str(out), "nodes": str(nodes)}) + "\n"
        with self._lock:
            for attempt in range(2):
                self._start()
                assert self._process is not None and self._process.stdin and self._process.stdout
                try:
                    self._process.stdin.write(line)
                    self._process.stdin.flush()
                    reply = self._process.stdout.readline()
                except (BrokenPipeError, OSError):
                    reply = ""
                if reply:
                    answer = json.loads(reply)
                    return None if answer["ok"] else answer["error"]
                self._process.wait()
                if attempt == 1:
                    return f"the torch-mlir worker exited with status {self._process.returncode}:\n" \
                           f"{self._log_tail()}"
        return None

    def _log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-4000:]

    def stop(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                assert self._process.stdin is not None
                self._process.stdin.close()  # the worker exits at end of input
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._release()

    def _release(self) -> None:
        """Closes the (exited) worker's pipes and log file."""
        if self._process is not None:
            for pipe in (self._process.stdin, self._process.stdout):
                if pipe is not None and not pipe.closed:
                    try:
                        pipe.close()
                    except OSError:   # a broken pipe's buffered line cannot be flushed
                        pass
        if self._log is not None:
            self._log.close()
        self._process, self._log = None, None


_SERVER = _ImportServer()
atexit.register(_SERVER.stop)

# The worker's answers (linalg text, nodes JSON) by program digest: the same
# graph with the same constants imports to the same text, whatever the
# weights (inputs here), so recompiling a model (another sparsity, other
# weights) skips the worker's re-trace (~0.6-1 s for a BERT layer).
_IMPORTED: OrderedDict[str, tuple[str, str]] = OrderedDict()
_IMPORTED_MAX = 16


def _program_digest(path: Path) -> str:
    """SHA-256 of a saved program's archive members, but its random
    serialization id (graph, signature, constants, metadata)."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(path) as archive:
        for name in sorted(archive.namelist()):
            if not name.endswith("serialization_id"):
                digest.update(name.encode())
                digest.update(archive.read(name))
    return digest.hexdigest()


def _import_text(program_path: Path, out_path: Path, nodes_path: Path, model_name: str) -> tuple[str, str]:
    key = _program_digest(program_path)
    if key in _IMPORTED:
        _IMPORTED.move_to_end(key)
        return _IMPORTED[key]
    error = _SERVER.request(program_path, out_path, nodes_path)
    if error is not None:
        raise ExportError(f"torch.export / torch-mlir could not capture {model_name}: "
                          f"torch-mlir failed:\n{error}")
    _IMPORTED[key] = (out_path.read_text(), nodes_path.read_text())
    if len(_IMPORTED) > _IMPORTED_MAX:
        _IMPORTED.popitem(last=False)
    return _IMPORTED[key]


def start_importer() -> None:
    """Starts the torch-mlir worker in the background (compile() calls this first)."""
    _SERVER.start()


# torch.export is not thread-safe: its tracing modes live on one global
# dispatch-mode stack ("ProxyTorchDispatchMode slot already occupied" from a
# second thread), and it swaps the model's parameters for fake tensors while
# it traces. Captures (and the model's train/eval flag they toggle) are
# serialised; the rest of a compile runs concurrently.
_CAPTURE_LOCK = threading.RLock()


def capture_lock() -> threading.RLock:
    """Held while a model is captured (its parameters are swapped for fake
    tensors meanwhile): hold it to read a model's parameters."""
    return _CAPTURE_LOCK


def export_program(model: torch.nn.Module,
                   example_args: Sequence[torch.Tensor]) -> tuple[Any, list[str], list[torch.Tensor]]:
    """(torch.export program, parameter names, their values): the model in
    eval mode with its parameters as leading inputs, then `example_args`.
    Needs only torch (GPU machines rebuild target="cuda" graphs with it).
    Safe to call from several threads (captures run one at a time)."""
    with _CAPTURE_LOCK:
        names = [name for name, _ in model.named_parameters()]
        # A snapshot: a compiled model computes with the weights it was
        # compiled from, dense or encoded alike; later in-place changes to the
        # model's parameters do not reach it (encoded weights are packed at
        # compile time, so nothing else could be one rule for all).
        params = [p.detach().clone() for _, p in model.named_parameters()]
        wrapper = _ParamsAsInputs(model, names)
        was_training = model.training
        model.eval()  # inference semantics (dropout off, running statistics), the user's flag restored
        try:
            program = torch.export.export(wrapper, (*params, *example_args))
        except Exception as error:  # torch.export raises many types; show them all
            raise ExportError(f"torch.export / torch-mlir could not capture {type(model).__name__}: "
                              f"{type(error).__name__}: {error}") from error
        finally:
            model.train(was_training)
    return program, names, params


def _scalar(arg: Any) -> bool | int | float | str | None:
    return arg if isinstance(arg, (bool, int, float, str)) else None


def _check_linalg_only(text: str, nodes: dict[str, NodeInfo]) -> None:
    """Raises, naming the model ops, where torch-mlir produced ops our MLIR cannot read."""
    foreign = foreign_ops(text)
    if foreign:
        ops = ", ".join(f"{op} (fx node '{node}'"
                        + (f", {nodes[node].target})" if node in nodes else ")") for op, node in foreign)
        raise ExportError(f"torch-mlir lowered some ops outside linalg-on-tensors, which sparse_mlir compiles: "
                          f"{ops}; rewrite them with ops that lower to linalg (or compute them outside the "
                          f"compiled model), or use {REGIONS_HINT}")


def import_model(model: torch.nn.Module, example_args: Sequence[torch.Tensor]) -> ImportedModel:
    _SERVER.start()
    program, names, params = export_program(model, example_args)
    dynamic = data_dependent_nodes(program.graph)
    if dynamic:
        raise ExportError(f"{type(model).__name__}: the size of some results depends on the input's values: "
                          + ", ".join(f"{op} (fx node '{node}')" for node, op in dynamic)
                          + f"; a whole-graph compile has static shapes: use {REGIONS_HINT}")
    with tempfile.TemporaryDirectory(prefix="sparse_mlir_import_") as tmp:
        program_path, out_path = Path(tmp) / "program.pt2", Path(tmp) / "linalg.mlir"
        nodes_path = Path(tmp) / "nodes.json"
        program.example_inputs = None  # the weights: the worker needs only the graph
        with _CAPTURE_LOCK:  # saving re-enters torch.export's machinery; the text cache is shared
            torch.export.save(program, program_path)
            text, nodes_json = _import_text(program_path, out_path, nodes_path, type(model).__name__)
        nodes = {n["name"]: NodeInfo(n["name"], n["target"], tuple(n["shape"]) if n["shape"] is not None else None,
                                     n["dtype"]) for n in json.loads(nodes_json)}
    graph = tuple(GraphNode(n.name, n.op, str(n.target), tuple(a.name for a in n.all_input_nodes), len(n.users),
                            tuple(_scalar(a) for a in n.args))
                  for n in program.graph.nodes)
    _check_linalg_only(text, nodes)
    return ImportedModel(text=text, param_names=names, params=params, num_inputs=len(example_args), nodes=nodes,
                         graph=graph, program=program)
