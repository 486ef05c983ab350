import sys

from pg_aio_exporter.cli import main

sys.exit(main())
