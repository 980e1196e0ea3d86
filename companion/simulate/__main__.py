# python -m companion.simulate SCENARIO: the verb without the rest of the CLI.
import sys

from companion.simulate.cli import main

sys.exit(main())
