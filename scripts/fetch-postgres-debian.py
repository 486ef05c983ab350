#!/usr/bin/env python3
"""Fetch PostgreSQL MAJOR (default 19) and its libraries from Debian's archive once per machine
(pg_aio_exporter.demo.debian: about a minute and 40 MB of downloads, 130 MB unpacked); print its
bin directory. `make test` runs it before the suite; a cached tree is reused without network.

When the archive has no such release: that one line on stderr and exit 0 (the suite then skips
the version with the same reason). Any other failure: one line on stderr, exit 1.
"""

from __future__ import annotations

import sys

from pg_aio_exporter.demo import debian


def main(argv: list[str]) -> int:
    major = argv[0] if argv else "19"
    try:
        print(debian.bin_dir(major))
    except debian.NoRelease as reason:
        print(f"fetch-postgres-debian: {reason}", file=sys.stderr)
    except debian.ArchiveError as error:
        print(f"fetch-postgres-debian: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
