"""`python -m torchmcu.selective --yaml Y [--table T]`: the kernels CMake compiles (a CMake list)."""

import sys

from torchmcu.selective.table import main

sys.exit(main())
