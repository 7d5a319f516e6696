"""``python -m hpcnn ...`` is the ``hpcnn`` command."""
import sys

from .cli import main

sys.exit(main())
