"""`python -m msv0 ...` runs the msv0 command line."""
import sys

from msv0.cli import main

sys.exit(main())
