"""``python -m appschedule``: the same as the ``appschedule`` command."""

import sys

from .cli import main

sys.exit(main())
