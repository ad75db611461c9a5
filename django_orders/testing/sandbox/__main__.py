"""``python -m django_orders.testing.sandbox``: serve the sandbox until interrupted."""

import sys

from .cli import main

sys.exit(main())
