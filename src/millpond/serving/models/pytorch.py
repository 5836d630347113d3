"""PyTorch models: a TorchScript archive, or a state dict plus the ``nn.Module`` class it belongs to.

The model directory holds one ``.pt`` or ``.pth`` file (``model.pt`` in KServe's PyTorch samples,
TorchServe's ``--serialized-file``). Without ``module`` the file must be TorchScript
(``torch.jit.save``) and is loaded with ``torch.jit.load``. With ``module`` ("pkg.mod:Class", the
way TorchServe's ``--model-file`` and KFServing's ``model_class_name`` name the class) the file is a
state dict, read with ``torch.load(weights_only=True)`` (no arbitrary unpickling) into ``Class()``;
the model directory is put first on ``sys.path``, so a ``model.py`` beside the weights is found as
``model:Class``.

Inputs become float32 tensors (what ``nn.Linear`` and ``nn.Conv*`` expect) unless the request sends
an integer or boolean tensor, which keeps its type (embedding indices). Shapes are unknown to
a TorchScript file, so only the model itself checks them; its errors become 400s.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import torch

from millpond.errors import MillpondError
from millpond.serving.models.base import InferenceInputError, ModelLoadError, TensorSpec
from millpond.serving.models.files import PYTORCH_EXTENSIONS, one_model_file


def module_class(spec: str, model_dir: Path) -> type[torch.nn.Module]:
    """The ``nn.Module`` subclass ``spec`` ("pkg.mod:Class") names, importable from ``model_dir`` too."""
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise ModelLoadError(f"--module {spec!r}: expected MODULE:CLASS, e.g. model:Net")
    sys.path.insert(0, str(model_dir))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a broken user module is a bad model, whatever it raises
        raise ModelLoadError(f"--module {spec!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ModelLoadError(f"--module {spec!r}: {module_name} has no torch.nn.Module subclass {class_name}")
    return cls


class PyTorchModel:
    """A TorchScript or state-dict model called in ``torch.inference_mode`` on the CPU."""

    def __init__(self, name: str, model_dir: Path, module: str | None = None, version: str | None = None) -> None:
        self.name = name
        self.version = version
        path = one_model_file(model_dir, PYTORCH_EXTENSIONS, "PyTorch")
        self._net = self._load_module(path, module, model_dir) if module else self._load_script(path)
        self._net.eval()
        self.platform = "pytorch" if module else "pytorch_torchscript"
        self.inputs: tuple[TensorSpec, ...] = (TensorSpec("input-0", "FP32", (-1,)),)
        self.outputs: tuple[TensorSpec, ...] = (TensorSpec("output-0", "FP32", (-1,)),)

    @staticmethod
    def _load_script(path: Path) -> torch.nn.Module:
        try:
            return torch.jit.load(str(path), map_location="cpu")
        except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError/ValueError/zipfile errors alike
            raise ModelLoadError(
                f"{path} is not a TorchScript archive ({_first_line(exc)}); "
                "for a state dict, name its class with --module"
            ) from None

    @staticmethod
    def _load_module(path: Path, spec: str, model_dir: Path) -> torch.nn.Module:
        cls = module_class(spec, model_dir)
        try:
            state = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - unreadable or not a plain state dict
            raise ModelLoadError(f"cannot read the state dict {path}: {_first_line(exc)}") from None
        if not isinstance(state, dict):
            raise ModelLoadError(f"{path} holds a {type(state).__name__}, not a state dict")
        try:
            net = cls()
            net.load_state_dict(state)
        except Exception as exc:  # noqa: BLE001 - constructor or key/shape mismatch
            raise ModelLoadError(f"{spec}: cannot load {path.name} into it: {_first_line(exc)}") from None
        return net

    def predict(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        tensors = []
        for array in inputs:
            if array.dtype == object:
                raise InferenceInputError(f"model {self.name!r} takes numbers, not strings")
            if array.dtype.kind == "f":
                array = array.astype(np.float32, copy=False)
            try:
                tensors.append(torch.from_numpy(np.ascontiguousarray(array)))
            except TypeError as exc:  # a numpy dtype torch has no tensor type for
                raise InferenceInputError(f"model {self.name!r} cannot take {array.dtype}: {exc}") from None
        try:
            with torch.inference_mode():
                result = self._net(*tensors)
        except (RuntimeError, ValueError, TypeError, IndexError) as exc:  # shape/dtype mismatches in forward
            raise InferenceInputError(f"model {self.name!r} refused the input: {_first_line(exc)}") from None
        results = result if isinstance(result, (tuple, list)) else (result,)
        if not all(isinstance(r, torch.Tensor) for r in results):  # the model's fault, not the request's: 500
            raise MillpondError(f"model {self.name!r} returned something other than tensors")
        # bfloat16 has no numpy dtype: such outputs travel as float32
        return [(r.float() if r.dtype == torch.bfloat16 else r).detach().cpu().numpy() for r in results]


def _first_line(exc: BaseException) -> str:
    """torch's messages run to many lines; an error line takes the one that says what went wrong.

    That is the first, except for TorchScript, whose first line only says that "the following
    operation failed" and whose last names the error (``RuntimeError: mat1 and mat2 ...``).
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[-1] if lines[0].startswith("The following operation failed") else lines[0]
