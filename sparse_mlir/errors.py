"""The one exception hierarchy of sparse_mlir: catch `SparseMLIRError` for all."""

from __future__ import annotations


class SparseMLIRError(Exception):
    """Base class of every error sparse_mlir raises on purpose."""


class SpecError(SparseMLIRError, ValueError):
    """An encoding or sparsifier was given invalid arguments."""


class SparseFallbackWarning(UserWarning):
    """A sparse tensor is read densely because its reader has no sparse lowering."""


class CompileError(SparseMLIRError):
    """A pass pipeline failed; carries the pipeline, the IR it ran on
    (`annotated_ir`: there is no compiled module to ask after a failure)
    and a reproducer command."""

    def __init__(self, message: str, pipeline: str | None = None, reproducer: str | None = None,
                 annotated_ir: str | None = None):
        details = [message]
        if pipeline:
            details.append(f"pipeline: {pipeline}")
        if reproducer:
            details.append(f"reproduce with: {reproducer}")
        super().__init__("\n".join(details))
        self.pipeline = pipeline
        self.reproducer = reproducer
        self.annotated_ir = annotated_ir
