"""TOSA 1.0 lowering of NPU sub-Programs, one module per op family (entry: torchmcu.npu.tosa.lower)."""
