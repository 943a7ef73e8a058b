"""Session setup: no test reads or writes the user's compile cache (npusim.app.compile_cache); tests of the cache give
it a directory of their own."""

import os

os.environ["NPUSIM_NO_CACHE"] = "1"
