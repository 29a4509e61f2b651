"""``python -m mb_estimation.cli``: the ``mb-estimation`` command."""

import sys

from mb_estimation.cli import main

sys.exit(main())
