"""``estimator_node`` (``ros2 run mb_estimation estimator_node``): the online node's entry point.

The online node is not part of this release yet; the entry point exists so that the ament
package layout and console scripts are complete, and says so plainly when run.
"""

import sys


def main(argv=None) -> int:
    """Report that the online estimator node is not available in this version."""
    print("estimator_node: the online estimator node is not available in mb_estimation "
          f"{__import__('mb_estimation').__version__} yet; use `mb-estimation simulate`.",
          file=sys.stderr)
    return 1
