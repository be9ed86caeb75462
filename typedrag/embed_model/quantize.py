"""Make the faster MiniLM (`minilm-int8-dynamic.onnx`, the embedder "minilm-fast") from the shipped one, offline.

    pip install onnx==1.23.2 sympy      # the maker's tools only; typedrag runs the result with ONNX Runtime alone
    python -m typedrag.embed_model.quantize

The shipped MiniLM stores int8 weights but computes in float32: ONNX Runtime casts each weight back at load, so
every MatMul runs in fp32. This recipe keeps the same weights and lets the CPU compute in int8:
1. ONNX Runtime's basic graph optimisation folds the cast-and-scale of every weight into a float32 constant;
2. ONNX Runtime's transformer optimiser fuses what it recognises in BERT (a bias into GELU, the residual add into
   LayerNormalization);
3. ONNX Runtime's dynamic quantisation turns every MatMul into MatMulInteger, int8 weights with one scale per
   output channel (per-tensor scales moved the vectors three times as far), the activations quantised per run.

The file is a pure function of the shipped model and the tools' versions (the same bytes from two runs); its
sha256 is pinned in typedrag.embed (FAST_SHA256), so a changed file is caught, never silently used. What it costs
in retrieval and gains in speed: docs/lab/2026-12-06-fast-embedder.md.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
from pathlib import Path

from typedrag.embed import FAST_PATH, model_files


def make(target: Path) -> str:
    """Write the quantised model to `target`; its sha256."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    source, _ = model_files()
    with tempfile.TemporaryDirectory() as work:
        folded, fused = Path(work) / "folded.onnx", Path(work) / "fused.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        optimize_model(str(folded), model_type="bert", num_heads=12, hidden_size=384, opt_level=0).save_model_to_file(
            str(fused)
        )
        quantize_dynamic(str(fused), str(target), weight_type=QuantType.QInt8, per_channel=True)
    return hashlib.sha256(target.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=FAST_PATH)
    args = parser.parse_args()
    print(f"{args.out}: sha256 {make(args.out)}")


if __name__ == "__main__":
    main()
