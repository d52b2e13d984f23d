"""Lets mlir-tblgen's generated op classes live outside the `mlir` package."""

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir.dialects._ods_common import *  # noqa: F401,F403
from mlir.dialects._ods_common import _cext  # noqa: F401
from mlir.dialects._ods_common import (  # noqa: F401
    equally_sized_accessor,
    get_default_loc_context,
    get_op_result_or_op_results,
    get_op_result_or_value,
    get_op_results_or_values,
    segmented_accessor,
)
