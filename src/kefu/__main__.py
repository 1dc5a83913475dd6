import sys

from kefu.cli import main

sys.exit(main())
