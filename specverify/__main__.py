"""``python -m specverify ...``: the ``specverify`` command line (``specverify.cli``)."""

import sys

from specverify.cli import main

if __name__ == "__main__":
    sys.exit(main())
