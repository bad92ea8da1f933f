"""A functional model of the Ethos-U55 that executes Vela's command stream over host memory.

Its only inputs are what Vela wrote (the driver payload, the weight data, the scratch size) and
the memory the driver maps to each base-pointer region. It knows nothing of our TOSA lowering.
"""
