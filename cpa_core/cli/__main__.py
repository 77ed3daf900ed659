"""``python -m cpa_core.cli``."""

import sys

from cpa_core.cli.main import main

sys.exit(main())
