"""Operator definitions, one module per operator or small family; torchmcu.ops loads them all."""
