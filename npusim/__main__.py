import sys

from npusim.app.cli import main

sys.exit(main())
