"""Static memory planning: one activation arena, offsets fixed on the host."""

from torchmcu.plan.memory import BufferRequest, MemoryPlan, describe, lower_bound, plan_memory

__all__ = ["BufferRequest", "MemoryPlan", "describe", "lower_bound", "plan_memory"]
