"""`python -m torchmcu ...` is the `torchmcu` command."""

import sys

from torchmcu.cli import main

sys.exit(main())
