"""Ethos-U NPU path: partitioning, sub-Program carving, TOSA 1.0 lowering, Vela compilation.

Modules are imported explicitly (torchmcu.npu.subprogram, .tosa.lower, .vela, ...) so that
importing the package stays cheap and needs neither tosa-tools nor Vela.
"""
