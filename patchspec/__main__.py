import sys

from patchspec.cli import main

sys.exit(main())
