"""`python -m api.deploy_local [--folder DIR] [--worker-cpus N]`: start the local deployment until Ctrl-C."""

import sys

from ._deploy import main

sys.exit(main())
